// Fetch responses decoded into columns for the receivers' fetch session (fetch-session.ts):
// kafkajs decodes every record of a fetch into objects (a KafkaMessage with Buffers, offset and
// timestamp strings), which was most of a receiver's CPU and memory. This replaces kafkajs's Fetch
// response decoder (v4–v11, the versions of RecordBatch v2) for the session's fetches, and leaves
// each partition's error to the session instead of failing the whole fetch (one fetch serves many
// cubes). kafkajs still sends the request, over its connections, SASL and TLS included.
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { decompressBatch, maxDecompressedBytes } from './codecs.ts';
import {
  type AbortedTransaction,
  type DecodedRecordSet,
  OffsetRangeError,
  decodeRecordSet,
  isExactOffset,
  isRecordBatchSet,
} from './record-batches.ts';
import { packValues } from './record-values.ts';

/**
 * The kafkajs version whose internals this file reads: the Fetch request definitions
 * (`protocol/requests/fetch`), the response shape its consumer reads, and its codec registry. A
 * different version fails `installColumnarFetch` loudly (and its unit test) instead of decoding
 * wrongly.
 */
export const kafkajsVersion = '2.2.4';

/**
 * The prefix of the `rackId`s reportingRackId hands out. kafkajs hands a consumer's rackId to every
 * Fetch it sends and to nothing else, so it marks the fetches to decode here. It never reaches the
 * broker (sent as '', kafkajs's default).
 */
export const columnarRackId = 'streamcube.columnar-fetch';

/**
 * The prefix of this copy of the module's marker: kafkajs's internals are patched once per copy,
 * and a process holding two (a test runner's module registries) passes another copy's fetches on.
 */
const ownPrefix = `${columnarRackId}/${randomUUID().slice(0, 8)}/`;

const isColumnar = (rackId: string | undefined): boolean => rackId?.startsWith(ownPrefix) === true;

/**
 * The `rackId` of fetches sent by fetch-session.ts, which reads the answer itself: each partition's
 * record set decoded (`FetchedPartition`), a partition's error left to it rather than thrown for
 * the whole fetch (one fetch serves many cubes). Never sent to the broker.
 */
export const sessionRackId = `${ownPrefix}session`;

/** One partition of a fetch sent with `sessionRackId`, as the session reads it. */
export interface FetchedPartition {
  partition: number;
  errorCode: number;
  highWatermark: bigint;
  /** -1 when the broker does not say. */
  lastStableOffset: bigint;
  /** -1 when the broker does not say (Fetch v4). */
  logStartOffset: bigint;
  /** The records; an Error when they could not be decoded (a codec missing, say). */
  decoded: DecodedRecordSet | Error;
}

export interface FetchedTopic {
  topicName: string;
  partitions: FetchedPartition[];
}

/** Fetch versions whose record sets are RecordBatch v2 (KIP-98), up to kafkajs's newest. */
const columnarVersions = new Set([4, 5, 6, 7, 8, 9, 10, 11]);

interface FetchTopic {
  topic: string;
  partitions: { partition: number; fetchOffset: string }[];
}
interface FetchArgs {
  topics: FetchTopic[];
  rackId?: string;
  [other: string]: unknown;
}
interface ResponseDecoder {
  decode: (raw: Buffer) => Promise<unknown>;
  parse: (data: unknown) => Promise<unknown>;
}
interface FetchRequest {
  request: unknown;
  response: ResponseDecoder;
  requestTimeout?: number;
}
interface FetchDefinitions {
  versions: string[];
  protocol: (v: { version: number }) => (args: FetchArgs) => FetchRequest;
}
interface KafkajsDecoder {
  readInt32(): number;
}
interface BrokerClass {
  prototype: { fetch: (args: FetchArgs) => Promise<unknown> };
}
interface KafkajsInternals {
  version: string;
  fetch: FetchDefinitions;
  /** kafkajs's Broker: its `fetch` sends a Fetch and resolves with the parsed response. */
  Broker: BrokerClass;
  Decoder: new (buffer: Buffer) => KafkajsDecoder;
  decodeMessages: (decoder: KafkajsDecoder) => Promise<unknown[]>;
}

const require = createRequire(import.meta.url);

/** The kafkajs internals used here, checked to have the shape this file was written against. */
export function kafkajsInternals(): KafkajsInternals {
  const { version } = require('kafkajs/package.json') as { version: string };
  const internals = {
    version,
    fetch: require('kafkajs/src/protocol/requests/fetch/index.js') as FetchDefinitions,
    Broker: require('kafkajs/src/broker/index.js') as BrokerClass,
    Decoder: require('kafkajs/src/protocol/decoder.js') as KafkajsInternals['Decoder'],
    decodeMessages:
      require('kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js') as KafkajsInternals['decodeMessages'],
  };
  const problems = [
    version !== kafkajsVersion && `version ${version}`,
    typeof internals.fetch.protocol !== 'function' && 'no fetch protocol()',
    !internals.fetch.versions.includes('11') && 'no Fetch v11',
    typeof internals.Broker?.prototype?.fetch !== 'function' && 'no Broker.fetch',
    typeof internals.Decoder !== 'function' && 'no Decoder',
    typeof internals.decodeMessages !== 'function' && 'no decodeMessages',
  ].filter(Boolean);
  if (problems.length > 0) {
    throw new Error(
      `kafkajs is not what src/kafka/columnar-fetch.ts was written against (${kafkajsVersion}): ${problems.join(', ')}`,
    );
  }
  return internals;
}

let installed = false;

/** Makes kafkajs decode the fetch session's fetches here (once per process). */
export function installColumnarFetch(): void {
  if (installed) return;
  const internals = kafkajsInternals();
  const { fetch } = internals;
  const protocol = fetch.protocol;
  fetch.protocol = ({ version }) => {
    const build = protocol({ version });
    return (args) => {
      if (!isColumnar(args.rackId)) return build(args);
      if (!columnarVersions.has(version)) {
        throw new Error(
          `the broker offers Fetch v${version}; the fetch session reads v4 to v11 (Kafka 0.11 on)`,
        );
      }
      return sessionFetch(build, args, version, internals);
    };
  };
  installed = true;
}

/** A fetch of fetch-session.ts: decoded here, each partition's error kept for the session. */
function sessionFetch(
  build: (args: FetchArgs) => FetchRequest,
  args: FetchArgs,
  version: number,
  internals: KafkajsInternals,
): FetchRequest {
  const request = build({ ...args, rackId: '' });
  const fetchOffsets = new Map<string, number>();
  for (const { topic, partitions } of args.topics) {
    for (const p of partitions) fetchOffsets.set(`${p.partition}:${topic}`, Number(p.fetchOffset));
  }
  return {
    ...request,
    response: {
      parse: (data) => Promise.resolve(data),
      decode: (raw) => decodeFetchResponse(raw, version, fetchOffsets, internals),
    },
  };
}

/** Reads the big-endian fields of a response, moving `at`. */
class ResponseReader {
  at = 0;
  readonly raw: Buffer;
  constructor(raw: Buffer) {
    this.raw = raw;
  }
  int16(): number {
    const v = this.raw.readInt16BE(this.at);
    this.at += 2;
    return v;
  }
  int32(): number {
    const v = this.raw.readInt32BE(this.at);
    this.at += 4;
    return v;
  }
  int64(): bigint {
    const v = this.raw.readBigInt64BE(this.at);
    this.at += 8;
    return v;
  }
  string(): string {
    const length = this.int16();
    const v = this.raw.toString('utf8', this.at, this.at + length);
    this.at += length;
    return v;
  }
}

/**
 * A Fetch response (v4–v11) in the shape kafkajs's own decoder gives, except that each partition's
 * records are decoded (`FetchedPartition.decoded`, aborted transactions applied) and its numbers
 * are bigints.
 */
export async function decodeFetchResponse(
  raw: Buffer,
  version: number,
  fetchOffsets: ReadonlyMap<string, number>,
  internals: Pick<KafkajsInternals, 'Decoder' | 'decodeMessages'>,
): Promise<{ responses: FetchedTopic[] } & Record<string, unknown>> {
  const r = new ResponseReader(raw);
  const throttleTime = r.int32();
  const head: Record<string, unknown> =
    version >= 8 ? { throttleTime: 0, clientSideThrottleTime: throttleTime } : { throttleTime };
  if (version >= 7) {
    head.errorCode = r.int16();
    head.sessionId = r.int32();
  }
  const responses: FetchedTopic[] = [];
  for (let t = r.int32(); t > 0; t--) {
    const topicName = r.string();
    const partitions: FetchedPartition[] = [];
    for (let p = r.int32(); p > 0; p--) {
      const partition = r.int32();
      const errorCode = r.int16();
      const highWatermark = r.int64();
      const lastStableOffset = r.int64();
      const logStartOffset = version >= 5 ? r.int64() : -1n;
      const aborted: AbortedTransaction[] = [];
      for (let a = r.int32(); a > 0; a--) {
        aborted.push({ producerId: r.int64(), firstOffset: Number(r.int64()) });
      }
      if (version >= 11) r.int32(); // preferred read replica: the session reads from leaders
      const setAt = r.at;
      const size = r.int32();
      let set: Buffer = Buffer.alloc(0);
      if (size > 0) {
        // Read on from a wrong place, every partition after it would be misread: the whole
        // answer is refused (the fetch fails and its readers restart).
        if (r.at + size > raw.length)
          throw new Error(
            `partition ${partition} of ${topicName}: the fetch answer's record set of ${size} bytes runs past its end`,
          );
        set = raw.subarray(r.at, r.at + size);
        r.at += size;
      }
      const fetchOffset = fetchOffsets.get(`${partition}:${topicName}`) ?? 0;
      partitions.push({
        partition,
        errorCode,
        highWatermark,
        lastStableOffset,
        logStartOffset,
        // Most partitions of a session's fetch have nothing new: no decoding, no promise each.
        decoded:
          set.length === 0
            ? nothingNew
            : await decodedSet(set, setAt, size, raw, fetchOffset, aborted, internals).catch(
                (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
              ),
      });
    }
    responses.push({ topicName, partitions });
  }
  return { ...head, responses };
}

/** An empty record set, decoded (shared: nothing in it is delivered, so nothing changes it). */
const nothingNew: DecodedRecordSet = Object.freeze({
  offsets: new Float64Array(0),
  values: { count: 0, buffer: new ArrayBuffer(0) },
  timestamps: new Float64Array(0),
  firstOffset: null,
  lastOffset: null,
  lastOffsetBefore: null,
});

/** A partition's record set decoded, whatever its format. */
async function decodedSet(
  set: Buffer,
  setAt: number,
  size: number,
  raw: Buffer,
  fetchOffset: number,
  aborted: AbortedTransaction[],
  internals: Pick<KafkajsInternals, 'Decoder' | 'decodeMessages'>,
): Promise<DecodedRecordSet> {
  if (isRecordBatchSet(set)) {
    // The codecs of codecs.ts, bounded: kafkajs's registry has no bound to pass.
    return decodeRecordSet(
      set,
      fetchOffset,
      aborted,
      (attributes, data, maxBytes) => decompressBatch(attributes & 0x07, data, maxBytes),
      maxDecompressedBytes(),
    );
  }
  // An older message set (before Kafka 0.11: no transactions): kafkajs decodes it.
  const messages = (await internals.decodeMessages(
    new internals.Decoder(raw.subarray(setAt, setAt + 4 + Math.max(0, size))),
  )) as { offset: string; timestamp: string; value: Buffer | null }[];
  const kept = messages.filter((m) => Number(m.offset) >= fetchOffset);
  const before = messages.filter((m) => Number(m.offset) < fetchOffset);
  const offsets = new Float64Array(kept.map((m) => Number(m.offset)));
  for (const m of kept) {
    if (!isExactOffset(Number(m.offset))) throw new OffsetRangeError(m.offset);
  }
  return {
    offsets,
    values: packValues(kept.map((m) => m.value)),
    timestamps: new Float64Array(kept.map((m) => Number(m.timestamp))),
    firstOffset: kept.length > 0 ? offsets[0]! : null,
    lastOffset: kept.length > 0 ? offsets[kept.length - 1]! : null,
    lastOffsetBefore: before.length > 0 ? Number(before[before.length - 1]!.offset) : null,
  };
}
