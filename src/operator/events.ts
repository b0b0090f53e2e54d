// Kubernetes Events about a CubeAssignment, for `kubectl describe`: core/v1 Events with the
// object as involvedObject. A repeat of the same reason and message bumps the count instead.
import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type CoreV1Event,
} from '@kubernetes/client-node';
import type { CubeAssignment } from '../api/cube-assignment.ts';
import type { Logger } from '../observability/logger.ts';

export class EventRecorder {
  private readonly api: CoreV1Api;
  private readonly component: string;
  private readonly logger: Logger;
  private readonly last = new Map<
    string,
    { reason: string; message: string; name: string; count: number }
  >();

  constructor(api: CoreV1Api, component: string, logger: Logger) {
    this.api = api;
    this.component = component;
    this.logger = logger;
  }

  record(
    object: CubeAssignment,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): void {
    void this.emit(object, type, reason, message).catch((error: unknown) =>
      this.logger.warn('cannot record event', { reason, error: (error as Error).message }),
    );
  }

  private async emit(
    object: CubeAssignment,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const namespace = object.metadata?.namespace ?? 'default';
    const uid = object.metadata?.uid ?? '';
    const now = new Date();
    const previous = this.last.get(uid);
    if (previous && previous.reason === reason && previous.message === message) {
      previous.count += 1;
      await this.api
        .patchNamespacedEvent(
          { name: previous.name, namespace, body: { count: previous.count, lastTimestamp: now } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )
        .catch(() => undefined);
      return;
    }
    const body: CoreV1Event = {
      metadata: { generateName: `${object.metadata?.name ?? 'cube'}.`, namespace },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name: object.metadata?.name ?? '',
        namespace,
        uid,
        ...(object.metadata?.resourceVersion
          ? { resourceVersion: object.metadata.resourceVersion }
          : {}),
      },
      reason,
      message,
      type,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: this.component },
      reportingComponent: this.component,
    };
    const created = await this.api.createNamespacedEvent({ namespace, body });
    this.last.set(uid, { reason, message, name: created.metadata?.name ?? '', count: 1 });
  }
}
