// Kubernetes Events about a CubeAssignment or a ReceiverPool, for `kubectl describe`: core/v1 Events with the
// object as involvedObject, correlated as client-go's EventCorrelator does: an Event of the same
// object, type and reason as one recorded before is that Event again, its count bumped and its
// lastTimestamp moved (and its message the latest), not a new object. Messages should carry no
// figures that change with every observation; the conditions have those.
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type CoreV1Event,
  type V1ObjectMeta,
} from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.ts';

/** The object an Event is about: a CubeAssignment, a ReceiverPool. */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  metadata: V1ObjectMeta;
}

export type EventsApi = Pick<CoreV1Api, 'createNamespacedEvent' | 'patchNamespacedEvent'>;

/** Series remembered at most, the least recently recorded forgotten first (client-go: 4096). */
const maxSeries = 4096;

interface Series {
  namespace: string;
  name: string;
  count: number;
  message: string;
}

export class EventRecorder {
  private readonly api: EventsApi;
  private readonly component: string;
  private readonly logger: Logger;
  /** By `uid/type/reason`, in order of last use. */
  private readonly series = new Map<string, Series>();
  /** By series key, the last write in flight: one series is written in order, never twice at once. */
  private readonly writing = new Map<string, Promise<void>>();

  constructor(api: EventsApi, component: string, logger: Logger) {
    this.api = api;
    this.component = component;
    this.logger = logger;
  }

  /** Records the Event in the background; a failure is logged, never thrown. */
  record(object: EventSubject, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const key = `${object.metadata?.uid ?? ''}/${type}/${reason}`;
    const previous = this.writing.get(key) ?? Promise.resolve();
    const next = previous
      .then(() => this.emit(key, object, type, reason, message))
      .catch((error: unknown) => {
        this.logger.warn('cannot record event', { reason, error: (error as Error).message });
      })
      .finally(() => {
        if (this.writing.get(key) === next) this.writing.delete(key);
      });
    this.writing.set(key, next);
  }

  /** Resolves once every Event recorded so far has been written (or has failed). */
  async flush(): Promise<void> {
    while (this.writing.size > 0) await Promise.all([...this.writing.values()]);
  }

  private async emit(
    key: string,
    object: EventSubject,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const now = new Date();
    const known = this.series.get(key);
    if (known) {
      try {
        await this.api.patchNamespacedEvent(
          {
            name: known.name,
            namespace: known.namespace,
            body: {
              count: known.count + 1,
              lastTimestamp: now,
              ...(known.message === message ? {} : { message }),
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        this.remember(key, { ...known, count: known.count + 1, message });
        return;
      } catch (error) {
        // The API server dropped the Event (its TTL, an hour by default): a new one starts.
        if (!(error instanceof ApiException && error.code === 404)) throw error;
        this.series.delete(key);
      }
    }
    const namespace = object.metadata?.namespace ?? 'default';
    const body: CoreV1Event = {
      metadata: { generateName: `${object.metadata?.name ?? 'cube'}.`, namespace },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name: object.metadata?.name ?? '',
        namespace,
        uid: object.metadata?.uid ?? '',
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
    this.remember(key, { namespace, name: created.metadata?.name ?? '', count: 1, message });
  }

  private remember(key: string, series: Series): void {
    this.series.delete(key);
    this.series.set(key, series);
    if (this.series.size > maxSeries) {
      const oldest = this.series.keys().next().value;
      if (oldest !== undefined) this.series.delete(oldest);
    }
  }
}
