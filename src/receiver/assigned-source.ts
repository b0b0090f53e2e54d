// A receiver believes the API server, not the request, about where a cube's credentials go: an
// assign that names a Secret (spec.source.tls.secretRef, spec.source.sasl.secretRef) is taken only
// when the CubeAssignment of that namespace and name says the same brokers and Secrets. Otherwise
// an admin-token holder could have the receiver read any Secret it may read and send what it holds
// to brokers of the caller's choosing.
import { type KafkaSource, kafkaSource } from '../api/cube.ts';
import { type CubeKey, cubeKeyString } from '../protocol/cube-paths.ts';
import { ChannelError } from './channel-error.ts';

/** The `spec.source` of the CubeAssignment `cube`, or undefined when there is no such object. */
export type AssignedSourceReader = (cube: CubeKey) => Promise<unknown>;

/** Whether a source names a Secret: only such an assign is checked against the API server. */
export const namesSecret = (source: Pick<KafkaSource, 'tls' | 'sasl'>): boolean =>
  source.tls?.secretRef !== undefined || source.sasl !== undefined;

/**
 * The first field of `requested` that differs from the CubeAssignment's `declared` source in what
 * decides where credentials go (brokers, TLS and its Secret, SASL and its Secret), or undefined.
 * Brokers compare as a set: their order changes nothing.
 */
export function sourceMismatch(
  requested: KafkaSource,
  declared: KafkaSource,
): { field: string; requested: unknown; declared: unknown } | undefined {
  const checks: [string, (s: KafkaSource) => unknown][] = [
    ['source.brokers', (s) => [...s.brokers].sort()],
    ['source.tls', (s) => s.tls !== undefined],
    ['source.tls.secretRef', (s) => s.tls?.secretRef ?? null],
    ['source.sasl', (s) => s.sasl !== undefined],
    ['source.sasl.secretRef', (s) => s.sasl?.secretRef ?? null],
    ['source.sasl.mechanism', (s) => s.sasl?.mechanism ?? null],
  ];
  for (const [field, of] of checks) {
    if (JSON.stringify(of(requested)) !== JSON.stringify(of(declared)))
      return { field, requested: of(requested), declared: of(declared) };
  }
  return undefined;
}

/**
 * Refuses (ChannelError naming the field) an assign of `cube` whose source names a Secret and
 * differs from the CubeAssignment's spec.source; a source naming no Secret is not looked up.
 */
export async function checkAssignedSource(
  cube: CubeKey,
  requested: KafkaSource,
  read: AssignedSourceReader,
): Promise<void> {
  if (!namesSecret(requested)) return;
  let declared: unknown;
  try {
    declared = await read(cube);
  } catch (error) {
    throw new ChannelError(
      'Unavailable',
      `cannot read CubeAssignment ${cubeKeyString(cube)} to check the Secrets this assign names: ${(error as Error).message}; retry`,
      'source',
    );
  }
  if (declared === undefined)
    throw new ChannelError(
      'Conflict',
      `no CubeAssignment ${cubeKeyString(cube)} exists: an assign naming Secrets is taken only for a cube whose spec.source names them`,
      'source',
    );
  const parsed = kafkaSource.safeParse(declared);
  if (!parsed.success)
    throw new ChannelError(
      'Conflict',
      `CubeAssignment ${cubeKeyString(cube)} has no valid spec.source to check this assign against`,
      'source',
    );
  const mismatch = sourceMismatch(requested, parsed.data);
  if (mismatch)
    throw new ChannelError(
      'Conflict',
      `${mismatch.field} is ${JSON.stringify(mismatch.requested)}, but CubeAssignment ${cubeKeyString(cube)} says ${JSON.stringify(mismatch.declared)}: a receiver reads only the Secrets the cube names and sends them only to its brokers`,
      mismatch.field,
    );
}
