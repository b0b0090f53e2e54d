// Parsing a batch of record values on a worker thread, so that JSON.parse runs on a second core
// while the main thread fetches: the values go over packed in one transferable buffer, the events
// come back as columns, dimension values dictionary-encoded (only new strings cross the thread).
import { Worker } from 'node:worker_threads';
import type { CubeSchema } from '../api/cube.ts';
import type { PackedValues } from '../kafka/record-values.ts';
import {
  type ParseResult,
  type ParsedEvent,
  type RejectReason,
  eventTextParser,
  rejectReasons,
} from './event.ts';
import { dimensionTooLong, dimensionTooLongCode, maxDimensionBytesOf } from './event-bounds.ts';
import { type ScannedEvent, eventScanner } from './event-scanner.ts';
import { keyOf } from './segments.ts';

/** The events of one batch as columns; record i's dimensions are `codes[i*d .. i*d+d)`. */
export interface ParsedColumns {
  count: number;
  times: Float64Array;
  /** Measure inputs, `values[i*m + j]`. */
  values: Float64Array;
  /** 0 for an event, else 1 + the index of its reason in rejectReasons. */
  reasons: Uint8Array;
  codes: Uint32Array;
  /** Row key (segments keyOf) of record i, dictionary-encoded in a dictionary of its own. */
  keys: Uint32Array;
  /** Dictionary strings added by this batch, in code order. */
  added: string[];
  /** Row keys added by this batch, in code order. */
  addedKeys: string[];
  /** The dictionary was emptied before this batch (it had grown too large). */
  reset: boolean;
}

/** A parsed batch on the main thread, with the dictionary its codes refer to. */
export interface ParsedBatch {
  columns: ParsedColumns;
  dictionary: readonly string[];
  keyDictionary: readonly string[];
}

/** The worker's side of the dictionaries: string → code, kept between batches. */
export interface Dictionaries {
  strings: Map<string, number>;
  keys: Map<string, number>;
  /**
   * Row key codes by the dimension codes packed into one number (when they fit in 53 bits): a
   * row seen before is found without building its key string.
   */
  keysByCodes?: Map<number, number>;
}

/** Beyond this many distinct dimension strings the dictionary starts afresh, bounding memory. */
const maxDictionary = 1 << 20;

/** How records become events: the scanner's fast path when it can, else the full parser. */
export interface RecordReader {
  parseText: (text: string) => ParseResult;
  scanner: ReturnType<typeof eventScanner>;
}

export const recordReader = (schema: CubeSchema): RecordReader => ({
  parseText: eventTextParser(schema),
  scanner: eventScanner(schema),
});

/** Parses packed values with `reader`; runs on the worker. `dictionary` is kept between batches. */
export function parseColumns(
  schema: CubeSchema,
  reader: RecordReader,
  dictionaries: Dictionaries,
  packed: PackedValues,
): ParsedColumns {
  const { strings: dictionary, keys } = dictionaries;
  const { count, buffer } = packed;
  const d = schema.dimensions.length;
  const m = schema.measures.length;
  const starts = new Int32Array(buffer, 0, count);
  const lengths = new Int32Array(buffer, count * 4, count);
  const bytes = Buffer.from(buffer, count * 8);
  const reset = dictionary.size > maxDictionary || keys.size > maxDictionary;
  const keysByCodes = (dictionaries.keysByCodes ??= new Map<number, number>());
  if (reset) {
    dictionary.clear();
    keys.clear();
    keysByCodes.clear();
  }
  // Each dimension code takes `bits` bits of the packed number; a larger code is not packed.
  const bits = d > 0 ? Math.floor(53 / d) : 0;
  const codeLimit = 2 ** bits;
  const columns: ParsedColumns = {
    count,
    times: new Float64Array(count),
    values: new Float64Array(count * m),
    reasons: new Uint8Array(count),
    codes: new Uint32Array(count * d),
    keys: new Uint32Array(count),
    added: [],
    addedKeys: [],
    reset,
  };
  const { parseText, scanner } = reader;
  const maxDimensionBytes = maxDimensionBytesOf(schema);
  records: for (let i = 0; i < count; i++) {
    const length = lengths[i]!;
    let event: ScannedEvent | ParsedEvent;
    if (length >= 0 && scanner?.scan(bytes, starts[i]!, starts[i]! + length)) {
      event = scanner.event;
    } else {
      let result: ParseResult;
      if (length < 0) result = { ok: false, reason: 'bad_json' };
      else result = parseText(bytes.toString('utf8', starts[i], starts[i]! + length));
      if (!result.ok) {
        columns.reasons[i] = 1 + rejectReasons.indexOf(result.reason);
        continue;
      }
      event = result.event;
    }
    // Before the dictionaries: a value refused is never held.
    for (let j = 0; j < d; j++) {
      if (dimensionTooLong(event.dimensions[j]!, maxDimensionBytes)) {
        columns.reasons[i] = dimensionTooLongCode;
        continue records;
      }
    }
    columns.times[i] = event.time;
    for (let j = 0; j < m; j++) columns.values[i * m + j] = event.values[j]!;
    let packedCodes = 0;
    for (let j = 0; j < d; j++) {
      const text = event.dimensions[j]!;
      let code = dictionary.get(text);
      if (code === undefined) {
        code = dictionary.size;
        dictionary.set(text, code);
        columns.added.push(text);
      }
      columns.codes[i * d + j] = code;
      packedCodes = code < codeLimit && packedCodes >= 0 ? packedCodes * codeLimit + code : -1;
    }
    let keyCode = packedCodes >= 0 ? keysByCodes.get(packedCodes) : undefined;
    if (keyCode === undefined) {
      const key = keyOf(event.dimensions);
      keyCode = keys.get(key);
      if (keyCode === undefined) {
        keyCode = keys.size;
        keys.set(key, keyCode);
        columns.addedKeys.push(key);
      }
      if (packedCodes >= 0) keysByCodes.set(packedCodes, keyCode);
    }
    columns.keys[i] = keyCode;
  }
  return columns;
}

export const transferablesOf = (c: ParsedColumns): ArrayBuffer[] =>
  [c.times, c.values, c.reasons, c.codes, c.keys].map((a) => a.buffer as ArrayBuffer);

export const reasonOf = (code: number): RejectReason => rejectReasons[code - 1]!;

/** The dictionaries of a parser's codes, rebuilt from its batches in the order it parsed them. */
class DictionaryMirror {
  private dictionary: string[] = [];
  private keyDictionary: string[] = [];

  batchOf(columns: ParsedColumns): ParsedBatch {
    if (columns.reset) {
      this.dictionary = [];
      this.keyDictionary = [];
    }
    for (const s of columns.added) this.dictionary.push(s);
    for (const k of columns.addedKeys) this.keyDictionary.push(k);
    return { columns, dictionary: this.dictionary, keyDictionary: this.keyDictionary };
  }
}

/**
 * Parses batches on the calling thread into the same columns as the worker: for batches too small
 * to be worth the round trip, and when the worker has failed.
 */
export class InlineBatchParser {
  private readonly schema: CubeSchema;
  private readonly reader: RecordReader;
  private readonly dictionaries: Dictionaries = { strings: new Map(), keys: new Map() };
  private readonly mirror = new DictionaryMirror();

  constructor(schema: CubeSchema) {
    this.schema = schema;
    this.reader = recordReader(schema);
  }

  parse(packed: PackedValues): ParsedBatch {
    return this.mirror.batchOf(parseColumns(this.schema, this.reader, this.dictionaries, packed));
  }
}

/**
 * One worker parsing the batches of one cube, in the order they are sent. Replies come back in
 * that order too, so the dictionary the main thread rebuilds matches the worker's codes.
 */
export class BatchParser {
  private readonly worker: Worker;
  private readonly waiting: {
    resolve: (b: ParsedBatch) => void;
    reject: (e: Error) => void;
  }[] = [];
  private readonly mirror = new DictionaryMirror();
  private failed: Error | undefined;

  constructor(schema: CubeSchema) {
    const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    this.worker = new Worker(new URL(`./batch-parser-worker.${ext}`, import.meta.url), {
      workerData: { schema },
    });
    this.worker.unref();
    this.worker.on('message', (columns: ParsedColumns) => {
      // Applied on receipt, in order: a batch's codes refer to the dictionary as of its reply.
      this.waiting.shift()?.resolve(this.mirror.batchOf(columns));
    });
    const fail = (error: Error): void => {
      this.failed ??= error;
      for (const w of this.waiting.splice(0)) w.reject(error);
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`batch parser worker exited (${code})`)));
  }

  /** Whether the worker can take batches; after a failure the caller parses on its own thread. */
  get available(): boolean {
    return this.failed === undefined;
  }

  /** Transfers `packed` to the worker: the caller's buffer is detached (empty) afterwards. */
  parse(packed: PackedValues): Promise<ParsedBatch> {
    if (this.failed) return Promise.reject(this.failed);
    const { promise, resolve, reject } = Promise.withResolvers<ParsedBatch>();
    this.waiting.push({ resolve, reject });
    this.worker.postMessage(packed, [packed.buffer]);
    return promise;
  }

  async close(): Promise<void> {
    this.failed ??= new Error('batch parser closed');
    await this.worker.terminate();
  }
}
