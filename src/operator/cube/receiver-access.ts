// The receivers as a cube's reconcile reaches them: one admin client per receiver, and each
// receiver's summary of a cube, read once per resync for all the cubes it serves (DESIGN §2)
// and alone for a cube changed on it since (ReceiverCubes).
import type { CubeSummary } from '../../protocol/admin-api.ts';
import { ReceiverApiError, type ReceiverClient } from '../../protocol/client.ts';
import type { CubeKey } from '../../protocol/cube-paths.ts';
import type { ReceiverEndpoint } from '../discovery.ts';
import { ReceiverCubes } from '../receiver-cubes.ts';

/** The admin calls a cube's reconcile makes on a receiver, for the cubes of one namespace. */
export interface CubeReceiverClient extends Pick<
  ReceiverClient,
  | 'cubes'
  | 'cubeSummary'
  | 'assign'
  | 'release'
  | 'drain'
  | 'pause'
  | 'resume'
  | 'seal'
  | 'unassign'
  | 'fence'
> {
  inNamespace(namespace: string): CubeReceiverClient;
}

/**
 * Makes the client of the receiver at `baseUrl`; it calls `onMutation` after each call that
 * changes a cube there, so that the cube is read afresh.
 */
export type ReceiverClientFactory = (
  baseUrl: string,
  onMutation: (cube?: CubeKey) => void,
) => CubeReceiverClient;

export class ReceiverAccess {
  private readonly clients = new Map<string, CubeReceiverClient>();
  private readonly summaries: ReceiverCubes;
  private readonly makeClient: ReceiverClientFactory;

  /** `maxAgeMs`: how old a receiver's listing of its cubes may be (the resync). */
  constructor(makeClient: ReceiverClientFactory, maxAgeMs: number) {
    this.makeClient = makeClient;
    this.summaries = new ReceiverCubes(
      {
        list: async (baseUrl) => (await this.clientAt(baseUrl).cubes()).cubes,
        one: async (baseUrl, key, signal) => {
          try {
            return await this.clientAt(baseUrl)
              .inNamespace(key.namespace)
              .cubeSummary(key.name, signal);
          } catch (error) {
            if (error instanceof ReceiverApiError && error.status === 404) return undefined;
            throw error;
          }
        },
      },
      { maxAgeMs },
    );
  }

  /** The receiver's client for the cubes of `namespace`. */
  client(endpoint: ReceiverEndpoint, namespace: string): CubeReceiverClient {
    return this.clientAt(endpoint.baseUrl).inNamespace(namespace);
  }

  /** The cube as the receiver last reported it; undefined when the receiver does not hold it. */
  summary(
    endpoint: ReceiverEndpoint,
    cube: CubeKey,
    signal: AbortSignal,
  ): Promise<CubeSummary | undefined> {
    return this.summaries.get(endpoint.baseUrl, cube, signal);
  }

  /** The next summary of the cube on this receiver is read from it, not from its listing. */
  readAfresh(endpoint: ReceiverEndpoint, cube: CubeKey): void {
    this.summaries.changedOn(endpoint.baseUrl, cube);
  }

  private clientAt(baseUrl: string): CubeReceiverClient {
    let client = this.clients.get(baseUrl);
    if (!client) {
      client = this.makeClient(baseUrl, (cube) => this.summaries.changedOn(baseUrl, cube));
      this.clients.set(baseUrl, client);
    }
    return client;
  }
}
