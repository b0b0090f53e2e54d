// Turns a zod definition into the structural OpenAPI v3 schema a CustomResourceDefinition needs,
// so the CRD is generated from the same definition as the TypeScript types and runtime checks.
import { z } from 'zod';

/** One `x-kubernetes-validations` entry: a CEL rule the API server evaluates on admission. */
export interface ValidationRule {
  rule: string;
  /** Shown to the user; say which field is wrong and what is expected. */
  message: string;
  /** JSONPath relative to the node carrying the rule; the API server reports the error there. */
  fieldPath?: string;
  /** No FieldValueDuplicate: the API server drops the message for it. */
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired';
}

/** The subset of JSONSchemaProps a structural schema uses, with the keys as they go on the wire. */
export interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, StructuralSchema>;
  additionalProperties?: StructuralSchema;
  items?: StructuralSchema;
  required?: string[];
  enum?: (string | number | boolean)[];
  default?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  nullable?: boolean;
  'x-kubernetes-validations'?: ValidationRule[];
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-int-or-string'?: true;
  'x-kubernetes-preserve-unknown-fields'?: true;
}

/** What a zod schema can say only to Kubernetes; pass the result to `.meta()`. */
export interface KubernetesExtensions {
  validations?: ValidationRule[];
  /** `set` makes the API server refuse duplicates; `map` merges list items by their keys. */
  listType?: 'atomic' | 'set' | 'map';
  listMapKeys?: string[];
  /**
   * `atomic`: the API server's field manager tracks the object as one field, not each field in
   * it (see cubeAssignmentStatus).
   */
  mapType?: 'atomic' | 'granular';
  /** zod records have no size check of their own: pair this with a refinement. */
  maxProperties?: number;
  /**
   * Kept as written, unchecked by this schema: a Kubernetes type embedded whole (a pod's
   * affinity), which the API server validates where it lands. Use on a z.looseObject({}).
   */
  preserveUnknownFields?: true;
}

export function kubernetes(ext: KubernetesExtensions): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  if (ext.validations) meta['x-kubernetes-validations'] = ext.validations;
  if (ext.listType) meta['x-kubernetes-list-type'] = ext.listType;
  if (ext.listMapKeys) meta['x-kubernetes-list-map-keys'] = ext.listMapKeys;
  if (ext.mapType) meta['x-kubernetes-map-type'] = ext.mapType;
  if (ext.maxProperties !== undefined) meta.maxProperties = ext.maxProperties;
  if (ext.preserveUnknownFields) meta['x-kubernetes-preserve-unknown-fields'] = true;
  return meta;
}

// Keywords kept, in the order they are written out (so the generated YAML reads top-down).
const keywordOrder = [
  'type',
  'description',
  'format',
  'enum',
  'default',
  'nullable',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'exclusiveMinimum',
  'maximum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'x-kubernetes-int-or-string',
  'x-kubernetes-preserve-unknown-fields',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
];
const recursive = new Set(['properties', 'additionalProperties', 'items']);

// Formats the API server validates itself; any other would be silently ignored there.
const knownFormats = new Set(['date-time', 'int32', 'int64']);

/**
 * The structural schema of `schema` as the API server sees input: defaults are emitted and
 * defaulted fields are optional. Throws, naming the path, on anything the API server cannot
 * enforce the same way (unions, references, unknown formats, regex features RE2 lacks).
 */
export function toStructuralSchema(schema: z.ZodType): StructuralSchema {
  const json = z.toJSONSchema(schema, {
    io: 'input',
    target: 'openapi-3.0',
    unrepresentable: 'throw',
    cycles: 'throw',
    reused: 'inline',
  }) as Record<string, unknown>;
  return structural(json, '');
}

function structural(node: Record<string, unknown>, path: string): StructuralSchema {
  const out: Record<string, unknown> = {};
  const where = path || '<root>';
  const preserved = node['x-kubernetes-preserve-unknown-fields'] === true;
  for (const [key, value] of Object.entries(node)) {
    // A z.looseObject's "any other key" and its empty properties: what preserving unknown fields says.
    if (preserved && (key === 'additionalProperties' || key === 'properties') && isEmpty(value))
      continue;
    if (key === '$schema') continue;
    if (key === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, Record<string, unknown>>).map(([name, child]) => [
          name,
          structural(child, `${path}.${name}`),
        ]),
      );
    } else if (key === 'items') {
      if (Array.isArray(value)) throw new Error(`${where}: tuples are not structural`);
      out.items = structural(value as Record<string, unknown>, `${path}[]`);
    } else if (key === 'additionalProperties') {
      // `false` is what pruning does anyway, and the API server refuses it beside properties.
      if (value !== false) {
        out.additionalProperties = structural(value as Record<string, unknown>, `${path}.*`);
      }
    } else if ((key === 'minimum' || key === 'maximum') && isSafeIntegerBound(value)) {
      // zod's z.int() adds ±MAX_SAFE_INTEGER; int64 fields carry no such bound in Kubernetes.
      continue;
    } else if (keywordOrder.includes(key) && !recursive.has(key)) {
      out[key] = value;
    } else {
      throw new Error(`${where}: '${key}' has no structural-schema equivalent`);
    }
  }
  if (
    out.type === undefined &&
    out['x-kubernetes-int-or-string'] !== true &&
    out['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    throw new Error(`${where}: every node of a structural schema needs a type`);
  }
  if (typeof out.format === 'string') {
    if (!knownFormats.has(out.format)) {
      throw new Error(`${where}: format '${out.format}' is not validated by the API server`);
    }
    // zod adds its own JS regex for date-time; the API server checks the format itself.
    if (out.format === 'date-time') delete out.pattern;
  }
  if (typeof out.pattern === 'string' && /\(\?[=!<]|\\[1-9]/.test(out.pattern)) {
    throw new Error(`${where}: pattern uses lookaround or backreferences, which RE2 lacks`);
  }
  return Object.fromEntries(
    Object.entries(out).sort(([a], [b]) => keywordOrder.indexOf(a) - keywordOrder.indexOf(b)),
  );
}

function isEmpty(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.keys(value).length === 0;
}

function isSafeIntegerBound(value: unknown): boolean {
  return value === Number.MAX_SAFE_INTEGER || value === Number.MIN_SAFE_INTEGER;
}
