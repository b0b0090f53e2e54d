// A stand-in for the StatefulSet controller and the kubelet, for suites of a ReceiverPool: no node
// runs here, so for each StatefulSet of a pool in the stack's namespace it makes the pods
// `<set>-<i>` (the template's labels, owned by the StatefulSet) and their claims, runs each as a receiver process
// on a loopback address of its own, marks the pod Ready and writes the StatefulSet's ready
// replicas; when a StatefulSet goes, it deletes its pods and stops their receivers with SIGTERM,
// as the garbage collector and the kubelet do. Before stopping them it records what each receiver
// still held of its cubes: a set the pool removed must have handed off and committed everything.
import { Registry } from 'prom-client';
import { ApiException, AppsV1Api, CoreV1Api, type V1StatefulSet } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { mergePatch } from '../../src/kubernetes/cube-api.ts';
import { SupervisedInformer } from '../../src/operator/runtime/informer.ts';
import { poolLabel, replicaSetLabel } from '../../src/operator/pool/set-names.ts';
import { keptUncommitted } from '../../src/operator/reassign/index.ts';
import { setPodReady } from './cluster.ts';
import { loopbackAddress, type OperatorStack } from './operator-stack.ts';
import type { ReceiverProcessOptions } from './receiver-process.ts';
import { ReceiverProcess } from './receiver-process.ts';

/** What one receiver of a departing set held of a cube when its StatefulSet went. */
export interface HeldAtDeparture {
  receiver: string;
  cube: string;
  /** Partitions of which it kept offsets not handed off and committed. */
  uncommitted: number[];
  segments: { active: number; immutable: number; handedOff: number };
}

/** A set whose StatefulSet went, and what its receivers held of cubes at that moment. */
export interface SetDeparture {
  set: string;
  /** Receivers that answered; one that did not is named in `unanswered`. */
  held: HeldAtDeparture[];
  unanswered: string[];
  /** Whether every receiver exited by itself within the grace period after SIGTERM. */
  graceful: boolean;
}

interface RunningSet {
  uid: string;
  receivers: ReceiverProcess[];
}

export interface PoolKubeletOptions {
  /** Receiver flags as the pool's extraArgs would give them (flush interval, idle timeout). */
  receiver?: Pick<ReceiverProcessOptions, 'idleTimeout' | 'flushInterval'>;
}

export class PoolKubelet {
  /** Sets whose StatefulSet went, in the order they went. */
  readonly departures: SetDeparture[] = [];
  /** Every receiver ever started, by set, in start order (stopped ones too: their hand-offs count). */
  readonly started = new Map<string, ReceiverProcess[]>();
  /** Failures of a convergence, retried; a suite may assert there were none it did not expect. */
  readonly errors: string[] = [];
  private readonly running = new Map<string, RunningSet>();
  private readonly chains = new Map<string, Promise<void>>();
  private informer: SupervisedInformer<V1StatefulSet> | undefined;
  private stopped = false;

  private readonly stack: OperatorStack;
  private readonly options: PoolKubeletOptions;

  constructor(stack: OperatorStack, options: PoolKubeletOptions = {}) {
    this.stack = stack;
    this.options = options;
  }

  async start(): Promise<void> {
    const { namespace, kc } = this.stack;
    const apps = kc.makeApiClient(AppsV1Api);
    this.informer = new SupervisedInformer<V1StatefulSet>({
      name: 'pool-kubelet-statefulsets',
      kubeConfig: kc,
      path: `/apis/apps/v1/namespaces/${namespace}/statefulsets`,
      list: () => apps.listNamespacedStatefulSet({ namespace, labelSelector: poolLabel }),
      labelSelector: poolLabel,
      registry: new Registry(),
      restartBackoff: { initialMs: 200, maxMs: 2_000 },
    });
    const enqueue = (sts: V1StatefulSet): void => this.enqueue(sts.metadata?.name ?? '');
    this.informer.addEventHandler({ add: enqueue, update: enqueue, delete: enqueue });
    this.informer.start();
    await this.informer.waitForSync();
  }

  /** Stops watching, waits for the convergence under way, and stops every receiver (SIGTERM). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer?.stop();
    await this.idle();
    for (const list of this.started.values()) for (const r of list) await r.stop();
  }

  /** Resolves once no convergence is under way. */
  async idle(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  /** The receivers running for `set` now, in ordinal order. */
  receiversOf(set: string): ReceiverProcess[] {
    return [...(this.running.get(set)?.receivers ?? [])];
  }

  /** One convergence of a set at a time; an event during one runs it once more afterwards. */
  private enqueue(set: string): void {
    if (!set || this.stopped) return;
    const next = (this.chains.get(set) ?? Promise.resolve()).then(() => this.converge(set));
    this.chains.set(set, next);
  }

  private async converge(set: string): Promise<void> {
    if (this.stopped) return;
    try {
      await this.convergeOnce(set);
    } catch (error) {
      this.errors.push(`${set}: ${(error as Error).message}`);
      await sleep(500);
      this.enqueue(set);
    }
  }

  private async convergeOnce(set: string): Promise<void> {
    const sts = this.informer?.get(set, this.stack.namespace);
    let current = this.running.get(set);
    const uid = sts && !sts.metadata?.deletionTimestamp ? sts.metadata?.uid : undefined;
    if (current && current.uid !== uid) {
      await this.depart(set, current);
      this.running.delete(set);
      current = undefined;
    }
    if (!sts || !uid) return;
    if (!current) this.running.set(set, (current = { uid, receivers: [] }));
    const desired = sts.spec?.replicas ?? 1;
    while (current.receivers.length < desired)
      current.receivers.push(await this.startPod(sts, current.receivers.length));
    while (current.receivers.length > desired) {
      const r = current.receivers.pop()!;
      await this.deletePod(r.options.id);
      await r.stop();
    }
    const ready = current.receivers.length;
    const status = sts.status;
    if (
      status?.replicas !== ready ||
      status.readyReplicas !== ready ||
      status.observedGeneration !== sts.metadata?.generation
    )
      await this.stack.kc.makeApiClient(AppsV1Api).patchNamespacedStatefulSetStatus(
        {
          name: set,
          namespace: this.stack.namespace,
          body: {
            status: {
              observedGeneration: sts.metadata?.generation,
              replicas: ready,
              readyReplicas: ready,
              availableReplicas: ready,
              currentReplicas: ready,
              updatedReplicas: ready,
            },
          },
        },
        mergePatch,
      );
  }

  /** Pod `<set>-<ordinal>` as the StatefulSet controller makes it, run and made Ready. */
  private async startPod(sts: V1StatefulSet, ordinal: number): Promise<ReceiverProcess> {
    const { namespace, kc } = this.stack;
    const set = sts.metadata!.name!;
    const name = `${set}-${ordinal}`;
    const labels = sts.spec?.template.metadata?.labels ?? {};
    await this.deletePod(name); // a pod left from an earlier StatefulSet of that name
    await this.createClaims(sts, name);
    await kc.makeApiClient(CoreV1Api).createNamespacedPod({
      namespace,
      body: {
        metadata: {
          name,
          labels: { ...labels, 'statefulset.kubernetes.io/pod-name': name },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'StatefulSet',
              name: set,
              uid: sts.metadata!.uid!,
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: 'receiver', image: 'streamcube:test' }] },
      },
    });
    const host = loopbackAddress();
    const receiver = new ReceiverProcess({
      namespace,
      id: name,
      replicaSet: labels[replicaSetLabel] ?? set,
      deepStorageDir: this.stack.deepStorageDir,
      host,
      port: this.stack.receiverPort,
      token: this.stack.token,
      readToken: this.stack.readToken,
      ...this.options.receiver,
    });
    try {
      await receiver.start();
      await setPodReady(kc, namespace, name, host, true);
    } catch (error) {
      await receiver.kill(); // the retry starts another for the same pod
      throw error;
    }
    this.started.set(set, [...(this.started.get(set) ?? []), receiver]);
    return receiver;
  }

  /**
   * The pod's claims, `<template>-<pod>`, labelled as the StatefulSet controller labels them (its
   * selector's labels), unless they are there from before (retained). Nothing binds them: the
   * receiver's data directory is its own.
   */
  private async createClaims(sts: V1StatefulSet, pod: string): Promise<void> {
    const core = this.stack.kc.makeApiClient(CoreV1Api);
    for (const template of sts.spec?.volumeClaimTemplates ?? []) {
      try {
        await core.createNamespacedPersistentVolumeClaim({
          namespace: this.stack.namespace,
          body: {
            metadata: {
              name: `${template.metadata?.name ?? 'data'}-${pod}`,
              labels: sts.spec?.selector.matchLabels ?? {},
            },
            spec: template.spec ?? {},
          },
        });
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
      }
    }
  }

  private async deletePod(name: string): Promise<void> {
    try {
      await this.stack.kc
        .makeApiClient(CoreV1Api)
        .deleteNamespacedPod({ name, namespace: this.stack.namespace, gracePeriodSeconds: 0 });
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) throw error;
    }
  }

  /** The StatefulSet went: what its receivers hold is recorded, their pods deleted, they stopped. */
  private async depart(set: string, current: RunningSet): Promise<void> {
    const departure: SetDeparture = { set, held: [], unanswered: [], graceful: true };
    for (const r of current.receivers) {
      try {
        const { cubes } = await r.client.cubes();
        for (const c of cubes)
          departure.held.push({
            receiver: r.options.id,
            cube: `${c.namespace}/${c.cube}`,
            uncommitted: keptUncommitted(c.coverage, Object.keys(c.coverage ?? {}).map(Number)),
            segments: c.segments,
          });
      } catch {
        departure.unanswered.push(r.options.id);
      }
    }
    for (const r of current.receivers) await this.deletePod(r.options.id);
    for (const r of current.receivers) if (!(await r.stop())) departure.graceful = false;
    this.departures.push(departure);
  }
}

/** A PoolKubelet on the stack's namespace, started in beforeAll and stopped in afterAll. */
export function usePoolKubelet(stack: OperatorStack, options?: PoolKubeletOptions): PoolKubelet {
  const kubelet = new PoolKubelet(stack, options);
  beforeAll(() => kubelet.start());
  afterAll(() => kubelet.stop());
  return kubelet;
}
