// Cube schemas for tests, one line each: measures by name as `count` or `sum(field)`, so that a
// suite says which dimensions and measures it needs instead of repeating the schema's literal.
import { cubeSchema, type CubeSchema } from '../../src/api/cube.ts';

/** A measure: `count`, or a function of an event field (`sum(price)`; `sum(price, 2)`: a scale). */
export type MeasureText = 'count' | `${'sum' | 'min' | 'max'}(${string})`;

export interface SchemaOptions {
  window: string;
  allowedLateness?: string;
  /** `ts` unless told. */
  timestampField?: string;
}

/**
 * The schema as a CubeAssignment's spec or an assign request carries it (not parsed, no
 * defaults): `dimensions` undefined leaves the key out.
 */
export function schemaInput(
  dimensions: string[] | undefined,
  measures: Record<string, MeasureText>,
  { window, allowedLateness, timestampField = 'ts' }: SchemaOptions,
) {
  return {
    timestampField,
    ...(dimensions ? { dimensions } : {}),
    measures: Object.entries(measures).map(([name, text]) => {
      if (text === 'count') return { name, function: 'count' as const };
      const [, fn, field, scale] = /^(sum|min|max)\(([^,]+)(?:, *(\d+))?\)$/.exec(text)!;
      return {
        name,
        function: fn as 'sum' | 'min' | 'max',
        field: field!,
        ...(scale === undefined ? {} : { scale: Number(scale) }),
      };
    }),
    window,
    ...(allowedLateness ? { allowedLateness } : {}),
  };
}

/** The schema parsed, with its defaults. */
export function schemaOf(
  dimensions: string[] | undefined,
  measures: Record<string, MeasureText>,
  options: SchemaOptions,
): CubeSchema {
  return cubeSchema.parse(schemaInput(dimensions, measures, options));
}
