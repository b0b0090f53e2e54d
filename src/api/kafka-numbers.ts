// Kafka's numbers as they travel in JSON, one definition for the CRD and the receiver admin API:
// partition numbers (int32) and offsets (int64, as decimal strings: a JSON number would lose them).
import { z } from 'zod';

/** A Kafka partition number (int32, never negative). */
export const partitionNumber = z.int().min(0).max(2_147_483_647);

/** A partition number as a map key (JSON object keys are strings). */
export const partitionKey = z
  .string()
  .max(10)
  .regex(/^(0|[1-9][0-9]*)$/, 'must be a partition number');

const int64Max = 2n ** 63n - 1n;
/** Offsets, high watermarks and lag: int64 as a decimal string, never a lossy number. */
export const offset = z
  .string()
  .max(19)
  .regex(/^(0|[1-9][0-9]*)$/, 'must be a non-negative integer as a string')
  // zod runs this check after a failed regex too: only a string of digits goes to BigInt.
  .refine((s) => !/^[0-9]+$/.test(s) || BigInt(s) <= int64Max, 'must fit in int64');
