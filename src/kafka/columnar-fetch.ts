// Fetch responses decoded into columns for the consumers that ask for it: kafkajs decodes every
// record of a fetch into objects (a KafkaMessage with Buffers, offset and timestamp strings), which
// was most of a receiver's CPU and memory. This replaces kafkajs's Fetch response decoder (v4–v11,
// the versions of RecordBatch v2) for fetches marked by `reportingRackId`; kafkajs still does
// everything else (group, offsets, pauses, seeks, retries) with stand-in messages.
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { ConsumedRecords } from './partition-consumer.ts';
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

/** Told, for every partition a fetch answered without error, the offset its log ends at. */
export type FetchedEndReporter = (topic: string, partition: number, end: bigint) => void;

interface Reporting {
  report: FetchedEndReporter;
  /** How long the broker may hold each fetch that finds nothing new (kafkajs's own otherwise). */
  fetchWaitMs?: number;
  /**
   * How to end each fetch under way, called at `close`: a fetch the broker still holds then ends
   * at once, with nothing. A fetch leaves the set when it settles (a consumer fetches for days).
   */
  enders: Set<() => void>;
}

const reporters = new Map<string, Reporting>();
let reporterSeq = 0;
/**
 * The rackIds of this copy of the module: kafkajs's internals are patched once per copy, and a
 * process holding two (a test runner's module registries) passes another copy's fetches on to it.
 */
const ownPrefix = `${columnarRackId}/${randomUUID().slice(0, 8)}/`;

/**
 * A `rackId` that marks a consumer's fetches to be decoded here and reports, after each
 * fetch, where each fetched partition's log ends: its last stable offset (the consumer reads
 * committed records only; a log without open transactions ends there at its high watermark).
 * Every idle consumer fetches each of its partitions at least once per fetch wait, so the
 * end of the log is known without asking the broker again. `fetchWaitMs` replaces the
 * consumer's maxWaitTimeInMs in its fetches only: kafkajs also sleeps that long between fetches
 * when every partition is paused, and a stop waits for that sleep. `close` stops the reports and
 * ends the consumer's fetch the broker is holding (it answers nothing), so that a consumer stopped
 * while idle does not wait out the fetch wait: call it once kafkajs has been told to stop, so that
 * its fetch loop ends rather than fetching again.
 */
export function reportingRackId(
  report: FetchedEndReporter,
  options: { fetchWaitMs?: number } = {},
): { rackId: string; close: () => void } {
  reporterSeq += 1;
  const rackId = `${ownPrefix}${reporterSeq}`;
  const enders = new Set<() => void>();
  reporters.set(rackId, { report, ...options, enders });
  return {
    rackId,
    close: () => {
      reporters.delete(rackId);
      for (const end of enders) end();
      enders.clear();
    },
  };
}

/** The fetches of marked consumers under way now (at most one per running consumer and broker). */
export function fetchesUnderWay(): number {
  let count = 0;
  for (const { enders } of reporters.values()) count += enders.size;
  return count;
}

/** Every consumer that wants its fetches decoded here marks them through reportingRackId. */
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

/**
 * What kafkajs's Batch and runner read of a message: offsets (strings), whether it is a control
 * record, the key of a control record, and the batch context of the aborted-transaction filter.
 */
export interface StandInMessage {
  offset: string;
  isControlRecord: boolean;
  key: null;
  value: null;
  headers: Record<string, never>;
  timestamp: string;
  attributes: number;
  magicByte: number;
  batchContext: { producerId: string; inTransaction: boolean };
  /** On the first stand-in of delivered records: all of them, as columns. */
  records?: ConsumedRecords;
}

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
  lookupCodecByAttributes: (attributes: number) => {
    decompress: (data: Buffer) => Promise<Buffer>;
  } | null;
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
    lookupCodecByAttributes: (
      require('kafkajs/src/protocol/message/compression/index.js') as Pick<
        KafkajsInternals,
        'lookupCodecByAttributes'
      >
    ).lookupCodecByAttributes,
    Decoder: require('kafkajs/src/protocol/decoder.js') as KafkajsInternals['Decoder'],
    decodeMessages:
      require('kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js') as KafkajsInternals['decodeMessages'],
  };
  const problems = [
    version !== kafkajsVersion && `version ${version}`,
    typeof internals.fetch.protocol !== 'function' && 'no fetch protocol()',
    !internals.fetch.versions.includes('11') && 'no Fetch v11',
    typeof internals.Broker?.prototype?.fetch !== 'function' && 'no Broker.fetch',
    typeof internals.lookupCodecByAttributes !== 'function' && 'no lookupCodecByAttributes',
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

/** Makes kafkajs decode the fetches marked by `reportingRackId` here (once per process). */
export function installColumnarFetch(): void {
  if (installed) return;
  const internals = kafkajsInternals();
  const { fetch } = internals;
  const protocol = fetch.protocol;
  fetch.protocol = ({ version }) => {
    const build = protocol({ version });
    if (!columnarVersions.has(version)) return build;
    return (args) => {
      if (!isColumnar(args.rackId)) return build(args);
      if (args.rackId === sessionRackId) return sessionFetch(build, args, version, internals);
      const reporting = reporters.get(args.rackId ?? '');
      const wait = reporting?.fetchWaitMs;
      const request = build({ ...args, rackId: '', ...(wait ? { maxWaitTime: wait } : {}) });
      const report = reporting?.report;
      const fetchOffsets = new Map<string, number>();
      for (const { topic, partitions } of args.topics) {
        for (const p of partitions)
          fetchOffsets.set(`${p.partition}:${topic}`, Number(p.fetchOffset));
      }
      return {
        ...request,
        response: {
          parse: request.response.parse,
          decode: async (raw) => {
            const decoded = await decodeFetchResponse(raw, version, fetchOffsets, internals);
            // Not once closed: an answer that comes after its consumer stopped is not news.
            if (report && reporters.get(args.rackId ?? '') === reporting)
              reportEnds(decoded, report);
            return decoded;
          },
        },
      };
    };
  };
  endFetchesAtClose(internals.Broker);
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
      decode: (raw) => decodeFetchResponse(raw, version, fetchOffsets, internals, 'session'),
    },
  };
}

/**
 * The parsed Fetch response kafkajs's consumer reads (`responses`) of a fetch ended by its
 * consumer's stop: no partition, so no batch; the fetch loop, told to stop, ends.
 */
const nothingFetched = { throttleTime: 0, errorCode: 0, sessionId: 0, responses: [] };

/** What of kafkajs's Broker the end of a held fetch reaches: its Fetch connection. */
interface BrokerConnections {
  connectionPool?: {
    pool?: { rejectRequests?: (error: Error) => void; socket?: { destroy(): void } }[];
  };
}

/**
 * Makes a marked consumer's fetch end when its reporting is closed (the consumer stops): the
 * broker holds a fetch that finds nothing for the whole fetch wait, and kafkajs's stop waits for
 * the fetch under way and then, disconnecting, for every request in flight. So the fetch resolves
 * with nothing, and the consumer's Fetch connection (kafkajs gives fetches a connection of their
 * own, the second of each broker's pool) drops its requests and closes: the broker's answer is
 * not read. A fetch of a consumer whose reporting is closed already is not sent.
 */
function endFetchesAtClose(Broker: BrokerClass): void {
  const fetch = Broker.prototype.fetch;
  Broker.prototype.fetch = function (this: BrokerConnections, args: FetchArgs): Promise<unknown> {
    if (!isColumnar(args.rackId) || args.rackId === sessionRackId) return fetch.call(this, args);
    const reporting = reporters.get(args.rackId ?? '');
    if (!reporting) {
      return new Promise((resolve) => setImmediate(() => resolve(nothingFetched)));
    }
    const sent = fetch.call(this, args);
    return new Promise((resolve, reject) => {
      const end = (): void => {
        resolve(nothingFetched); // first: the rejection below then changes nothing
        const connection = this.connectionPool?.pool?.[1];
        connection?.rejectRequests?.(new Error('the consumer stopped'));
        connection?.socket?.destroy();
      };
      reporting.enders.add(end);
      void sent.then(resolve, reject).finally(() => reporting.enders.delete(end));
    });
  };
}

function reportEnds(decoded: Record<string, unknown>, report: FetchedEndReporter): void {
  const responses = decoded.responses as {
    topicName: string;
    partitions: {
      partition: number;
      errorCode: number;
      highWatermark: string;
      lastStableOffset: string;
    }[];
  }[];
  for (const { topicName, partitions } of responses) {
    for (const p of partitions) {
      if (p.errorCode !== 0) continue;
      const lastStable = BigInt(p.lastStableOffset);
      report(topicName, p.partition, lastStable >= 0n ? lastStable : BigInt(p.highWatermark));
    }
  }
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
 * `messages` are stand-ins and its `abortedTransactions` are already applied (empty).
 */
export async function decodeFetchResponse(
  raw: Buffer,
  version: number,
  fetchOffsets: ReadonlyMap<string, number>,
  internals: Pick<KafkajsInternals, 'lookupCodecByAttributes' | 'Decoder' | 'decodeMessages'>,
  mode: 'standIns' | 'session' = 'standIns',
): Promise<Record<string, unknown>> {
  const r = new ResponseReader(raw);
  const throttleTime = r.int32();
  const head: Record<string, unknown> =
    version >= 8 ? { throttleTime: 0, clientSideThrottleTime: throttleTime } : { throttleTime };
  if (version >= 7) {
    head.errorCode = r.int16();
    head.sessionId = r.int32();
  }
  const responses = [];
  for (let t = r.int32(); t > 0; t--) {
    const topicName = r.string();
    const partitions = [];
    for (let p = r.int32(); p > 0; p--) {
      const partition = r.int32();
      const errorCode = r.int16();
      const highWatermark = r.int64().toString();
      const lastStableOffset = r.int64().toString();
      const logStart = version >= 5 ? { lastStartOffset: r.int64().toString() } : {};
      const aborted: AbortedTransaction[] = [];
      for (let a = r.int32(); a > 0; a--) {
        aborted.push({ producerId: r.int64(), firstOffset: Number(r.int64()) });
      }
      const replica = version >= 11 ? { preferredReadReplica: r.int32() } : {};
      const setAt = r.at;
      const size = r.int32();
      let set: Buffer = Buffer.alloc(0);
      if (size > 0 && r.at + size <= raw.length) {
        set = raw.subarray(r.at, r.at + size);
        r.at += size;
      }
      const fetchOffset = fetchOffsets.get(`${partition}:${topicName}`) ?? 0;
      if (mode === 'session') {
        const fetched: FetchedPartition = {
          partition,
          errorCode,
          highWatermark: BigInt(highWatermark),
          lastStableOffset: BigInt(lastStableOffset),
          logStartOffset:
            logStart.lastStartOffset !== undefined ? BigInt(logStart.lastStartOffset) : -1n,
          decoded: await decodedSet(set, setAt, size, raw, fetchOffset, aborted, internals).catch(
            (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
          ),
        };
        partitions.push(fetched);
        continue;
      }
      let messages: unknown[];
      let abortedTransactions: { producerId: string; firstOffset: string }[] = [];
      if (isRecordBatchSet(set)) {
        const decoder = internals.lookupCodecByAttributes;
        const decoded = await decodeRecordSet(set, fetchOffset, aborted, (attributes, data) => {
          const codec = decoder(attributes);
          if (!codec) throw new Error(`no codec for record batch attributes ${attributes}`);
          return codec.decompress(data);
        });
        messages = standInsOf(decoded, fetchOffset);
      } else {
        // An older message set: kafkajs decodes it and filters it as always.
        messages = await internals.decodeMessages(
          new internals.Decoder(raw.subarray(setAt, setAt + 4 + Math.max(0, size))),
        );
        abortedTransactions = aborted.map((a) => ({
          producerId: a.producerId.toString(),
          firstOffset: a.firstOffset.toString(),
        }));
      }
      partitions.push({
        partition,
        errorCode,
        highWatermark,
        lastStableOffset,
        ...logStart,
        abortedTransactions,
        ...replica,
        messages,
      });
    }
    responses.push({ topicName, partitions });
  }
  return { ...head, responses };
}

/** A partition's record set decoded, whatever its format. */
async function decodedSet(
  set: Buffer,
  setAt: number,
  size: number,
  raw: Buffer,
  fetchOffset: number,
  aborted: AbortedTransaction[],
  internals: Pick<KafkajsInternals, 'lookupCodecByAttributes' | 'Decoder' | 'decodeMessages'>,
): Promise<DecodedRecordSet> {
  if (isRecordBatchSet(set)) {
    return decodeRecordSet(set, fetchOffset, aborted, (attributes, data) => {
      const codec = internals.lookupCodecByAttributes(attributes);
      if (!codec) throw new Error(`no codec for record batch attributes ${attributes}`);
      return codec.decompress(data);
    });
  }
  // An older message set (before Kafka 0.11: no transactions): kafkajs decodes it.
  const messages = (await internals.decodeMessages(
    new internals.Decoder(raw.subarray(setAt, setAt + 4 + Math.max(0, size))),
  )) as { offset: string; value: Buffer | null }[];
  const kept = messages.filter((m) => Number(m.offset) >= fetchOffset);
  const before = messages.filter((m) => Number(m.offset) < fetchOffset);
  const offsets = new Float64Array(kept.map((m) => Number(m.offset)));
  for (const m of kept) {
    if (!isExactOffset(Number(m.offset))) throw new OffsetRangeError(m.offset);
  }
  return {
    offsets,
    values: packValues(kept.map((m) => m.value)),
    firstOffset: kept.length > 0 ? offsets[0]! : null,
    lastOffset: kept.length > 0 ? offsets[kept.length - 1]! : null,
    lastOffsetBefore: before.length > 0 ? Number(before[before.length - 1]!.offset) : null,
  };
}

function standIn(offset: number, isControlRecord: boolean): StandInMessage {
  return {
    offset: String(offset),
    isControlRecord,
    key: null,
    value: null,
    headers: {},
    timestamp: '-1',
    attributes: 0,
    magicByte: 2,
    batchContext: { producerId: '-1', inTransaction: false },
  };
}

/**
 * Messages from which kafkajs's Batch computes what it would from all of them: the first and
 * last offset covered at or past the fetch offset (control records stand for skipped ones, which
 * kafkajs filters out of `batch.messages` but moves past), the first and last delivered record,
 * the first of which carries the columns; and, when nothing is at or past the fetch offset, a
 * record before it (kafkajs then moves past the fetch offset, as it does for compacted batches).
 */
export function standInsOf(decoded: DecodedRecordSet, fetchOffset: number): StandInMessage[] {
  const { offsets, values, firstOffset, lastOffset, lastOffsetBefore } = decoded;
  if (firstOffset === null || lastOffset === null) {
    return lastOffsetBefore === null ? [] : [standIn(lastOffsetBefore, true)];
  }
  const count = offsets.length;
  if (count === 0) {
    return firstOffset === lastOffset
      ? [standIn(firstOffset, true)]
      : [standIn(firstOffset, true), standIn(lastOffset, true)];
  }
  const firstDelivered = offsets[0]!;
  const lastDelivered = offsets[count - 1]!;
  const head = standIn(firstDelivered, false);
  head.records = { offsets, values, fetchOffset };
  return [
    ...(firstOffset < firstDelivered ? [standIn(firstOffset, true)] : []),
    head,
    ...(lastDelivered > firstDelivered ? [standIn(lastDelivered, false)] : []),
    ...(lastOffset > lastDelivered ? [standIn(lastOffset, true)] : []),
  ];
}

/** The columns a stand-in carries, when kafkajs's batch came from a columnar fetch. */
export function columnarRecordsOf(messages: readonly unknown[]): ConsumedRecords | undefined {
  return (messages[0] as Partial<StandInMessage> | undefined)?.records;
}
