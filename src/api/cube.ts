// The cube: its Kafka source and its schema (timestamp, dimensions, measures, window). One zod
// definition gives the TypeScript types, the receiver's request validation and the CRD schema.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { durationPattern, parseDuration } from './duration.ts';

/** Names of dimensions and measures: they become column names in hand-off files. */
export const identifier = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, 'must be a letter or _ followed by letters, digits or _');

export const duration = z
  .string()
  .regex(new RegExp(durationPattern), 'must be a duration like 1h, 10m, 90s');

export const kafkaSource = z.object({
  brokers: z.array(z.string().regex(/^[^\s:]+:[0-9]{1,5}$/, 'must be host:port')).min(1),
  topic: z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'must be a valid Kafka topic name'),
  startingOffsets: z.enum(['earliest', 'latest']).default('earliest'),
  /** TLS to the brokers; `secretRef` names a Secret of the cube's namespace (ca.crt, tls.crt, tls.key). */
  tls: z.object({ secretRef: z.string().min(1).max(253).optional() }).optional(),
  /** SASL; `secretRef` names a Secret of the cube's namespace (username, password). */
  sasl: z
    .object({
      mechanism: z.enum(['plain', 'scram-sha-256', 'scram-sha-512']),
      secretRef: z.string().min(1).max(253),
    })
    .optional(),
  /** SASL without TLS: credentials in clear (PLAIN) or open to a man in the middle; refused unless set. */
  allowPlaintext: z.boolean().optional(),
});
export type KafkaSource = z.infer<typeof kafkaSource>;

/** Why `source` is refused: SASL without TLS, unless it says allowPlaintext. */
export function plaintextSaslProblem(source: z.input<typeof kafkaSource>): string | undefined {
  if (!source.sasl || source.tls || source.allowPlaintext === true) return undefined;
  return `SASL ${source.sasl.mechanism} without tls sends the credentials where anyone on the path can read or replay them: add source.tls, or set source.allowPlaintext: true for a broker you trust without TLS`;
}

export const measureFunctions = ['count', 'sum', 'min', 'max'] as const;
export type MeasureFunction = (typeof measureFunctions)[number];

export const measure = z
  .object({
    name: identifier,
    function: z.enum(measureFunctions),
    /** The event field the measure reads; `count` reads none. */
    field: z.string().min(1).optional(),
    /**
     * `sum` only: the decimals the field carries (2 for money). The sum is then kept as an
     * integer count of 10^-scale units end to end (scaled-sum.ts) and answered as a decimal
     * string, exact whatever order events and pieces were added in (docs/query.md).
     */
    scale: z.int().min(0).max(18).optional(),
  })
  .refine((m) => m.function === 'count' || m.field !== undefined, {
    message: 'field is required for sum, min and max',
    path: ['field'],
  })
  .refine((m) => m.scale === undefined || m.function === 'sum', {
    message: 'scale is for sum only',
    path: ['scale'],
  });
export type Measure = z.infer<typeof measure>;

export const cubeSchema = z
  .object({
    /** Event field holding the event time: epoch milliseconds or an ISO-8601 string. */
    timestampField: z.string().min(1),
    dimensions: z.array(identifier).max(32).default([]),
    measures: z.array(measure).min(1),
    window: duration,
    allowedLateness: duration.default('0s'),
    /**
     * How far an event time may lie past its Kafka batch's timestamp before the record is
     * rejected (`future_timestamp`); the receiver's default (1h) when absent.
     */
    maxEventTimeSkew: duration.optional(),
    /**
     * The longest dimension value, in UTF-8 bytes, before the record is rejected
     * (`dimension_too_long`); the receiver's default (4096) when absent.
     */
    maxDimensionBytes: z.number().int().min(1).max(1_048_576).optional(),
    /**
     * The most distinct rows (dimension values) one partition may bring into one window under its
     * epoch before a record bringing another is rejected (`too_many_rows`); the receiver's default
     * (100,000) when absent.
     */
    maxRowsPerWindow: z.number().int().min(1).max(10_000_000).optional(),
  })
  .superRefine((s, ctx) => {
    const names = [...s.dimensions, ...s.measures.map((m) => m.name)];
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup !== undefined) {
      ctx.addIssue({ code: 'custom', message: `name '${dup}' is used twice`, path: ['measures'] });
    }
    const window = parseDuration(s.window) ?? 0;
    if (window <= 0)
      ctx.addIssue({ code: 'custom', message: 'must be positive', path: ['window'] });
    if ((parseDuration(s.allowedLateness) ?? 0) >= window) {
      ctx.addIssue({ code: 'custom', message: 'must be below window', path: ['allowedLateness'] });
    }
  });
export type CubeSchema = z.infer<typeof cubeSchema>;

/** JSON with object keys sorted: the same value gives the same text whoever built it. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * A short digest of the cube as a receiver runs it (source and schema, defaults applied), so the
 * operator can tell whether a receiver runs the spec it wants without comparing field by field.
 */
export function cubeSpecDigest(spec: { source: unknown; schema: unknown }): string {
  const normal = { source: kafkaSource.parse(spec.source), schema: cubeSchema.parse(spec.schema) };
  return createHash('sha256').update(canonicalJson(normal)).digest('hex').slice(0, 16);
}

/** Cube names are DNS labels: they appear in Kubernetes names, metric labels and file paths. */
export const cubeName = z
  .string()
  .regex(
    /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
    'must be a DNS label (lowercase letters, digits, -)',
  );
