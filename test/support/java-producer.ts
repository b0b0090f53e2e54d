// Kafka's own Java producer (kafka-clients, from the broker's classpath) as a test's producer:
// batches compressed and framed as production producers write them, transactions with real
// markers, and the exact offset of every record written as ground truth. One JVM per producer,
// driven line by line through java/Producer.java, which documents the protocol.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { type CodecName, codecNames } from '../../src/kafka/codecs.ts';
import { resolveKafkaClasspath } from '../../src/local/kafka.ts';
import { testEnvironment } from '../env/connection.ts';
import { runCommand } from '../../src/local/processes.ts';

const producerSource = resolve(import.meta.dirname, 'java', 'Producer.java');

const compiled = new Map<string, Promise<string>>();

/**
 * Producer.java compiled against this classpath, once per source and classpath: `java File.java`
 * would compile it again at every start, seconds of CPU on a busy machine. Returns the folder of
 * the class; concurrent test workers each compile aside and the first rename wins.
 */
function compileProducer(classpath: string): Promise<string> {
  const source = readFileSync(producerSource);
  const key = createHash('sha256').update(source).update(classpath).digest('hex').slice(0, 16);
  let done = compiled.get(key);
  if (!done) {
    done = (async () => {
      const dir = join(tmpdir(), `streamcube-java-producer-${key}`);
      if (existsSync(join(dir, 'Producer.class'))) return dir;
      const scratch = mkdtempSync(`${dir}.tmp-`);
      await runCommand('javac', ['-cp', classpath, '-d', scratch, producerSource]);
      try {
        renameSync(scratch, dir);
      } catch {
        rmSync(scratch, { recursive: true, force: true }); // another worker was first
      }
      return dir;
    })();
    compiled.set(key, done);
  }
  return done;
}

export type Compression = CodecName;
export const compressions: readonly Compression[] = codecNames;

export interface JavaProducerOptions {
  topic: string;
  /** Defaults to the test environment's broker. */
  bootstrap?: string;
  /** Kafka version whose classpath to run; defaults to the test environment's broker version. */
  kafkaVersion?: string;
  /** `compression.type`; `none` unless given. */
  compression?: Compression;
  /** `linger.ms`: how long a batch waits for more records (the client's default is 5 ms). */
  lingerMs?: number;
  /** `batch.size` in bytes (the client's default is 16384). */
  batchSize?: number;
  /** Makes the producer transactional: begin, commit and abort are then available. */
  transactionalId?: string;
  /** Any other producer settings, passed to kafka-clients as they are. */
  settings?: Record<string, string>;
  /** Where the JVM's own output (kafka-clients logging) goes; kept in memory only otherwise. */
  logFile?: string;
}

/** How a written record ended: what a read_committed consumer sees is `plain` and `committed`. */
export type RecordOutcome = 'plain' | 'open' | 'committed' | 'aborted';

export interface WrittenRecord {
  partition: number;
  offset: bigint;
  value: string;
  outcome: RecordOutcome;
}

export class JavaProducerError extends Error {}

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

interface PendingRecord {
  partition: number | undefined;
  value: string;
  transaction: number | undefined;
  /** Called with the offset written at, or the error that kept the record out. */
  done: (result: bigint | Error) => void;
}

interface Written {
  partition: number;
  offset: bigint;
  value: string;
  transaction: number | undefined;
}

export class JavaProducer {
  readonly options: JavaProducerOptions;
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly stderrTail: string[] = [];
  private seq = 0;
  private readonly commands = new Map<number, Waiter>();
  private readonly pending = new Map<number, PendingRecord>();
  private readonly written: Written[] = [];
  private transaction: number | undefined;
  private transactions = 0;
  private readonly outcomes = new Map<number, 'committed' | 'aborted'>();
  private readyWaiter: Waiter | undefined;
  /** Settles when standard input, full, drains (or the JVM exits). */
  private drained: Promise<unknown> | undefined;
  /** Settles when the JVM has exited. */
  private readonly exit: Promise<void>;
  private exited: Error | undefined;

  private constructor(
    options: JavaProducerOptions,
    classpath: string,
    classDir: string,
    bootstrap: string,
  ) {
    this.options = options;
    const settings: Record<string, string> = {
      'compression.type': options.compression ?? 'none',
      acks: 'all',
      ...(options.lingerMs !== undefined ? { 'linger.ms': String(options.lingerMs) } : {}),
      ...(options.batchSize !== undefined ? { 'batch.size': String(options.batchSize) } : {}),
      ...(options.transactionalId ? { 'transactional.id': options.transactionalId } : {}),
      ...options.settings,
    };
    this.child = spawn(
      'java',
      [
        '-Xmx256m',
        '-XX:+UseSerialGC',
        '-cp',
        `${classDir}:${classpath}`,
        'Producer',
        bootstrap,
        options.topic,
        ...Object.entries(settings).map(([k, v]) => `${k}=${v}`),
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.child.stdin.on('error', () => undefined); // a dead JVM is reported by 'exit'
    createInterface({ input: this.child.stdout }).on('line', (line) => this.onAnswer(line));
    createInterface({ input: this.child.stderr }).on('line', (line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > 40) this.stderrTail.shift();
      if (options.logFile) appendFileSync(options.logFile, `${line}\n`);
    });
    this.exit = new Promise((resolvePromise) => this.child.once('exit', () => resolvePromise()));
    this.child.on('exit', (code, signal) => {
      this.fail(new JavaProducerError(`Java producer exited with ${code ?? signal}`));
    });
  }

  /** Starts a producer JVM and waits until it is connected (and its transactions initialised). */
  static async start(options: JavaProducerOptions): Promise<JavaProducer> {
    const env = options.bootstrap && options.kafkaVersion ? undefined : testEnvironment();
    const bootstrap = options.bootstrap ?? env!.kafka.bootstrap;
    const classpath = await resolveKafkaClasspath(options.kafkaVersion ?? env!.kafka.version);
    const producer = new JavaProducer(
      options,
      classpath,
      await compileProducer(classpath),
      bootstrap,
    );
    await new Promise<void>((resolvePromise, reject) => {
      producer.readyWaiter = { resolve: resolvePromise, reject };
    });
    return producer;
  }

  /** Every record written so far, in the order acknowledged per partition. */
  get records(): WrittenRecord[] {
    return this.written.map((w) => ({
      partition: w.partition,
      offset: w.offset,
      value: w.value,
      outcome: this.outcomeOf(w.transaction),
    }));
  }

  /** The records a read_committed consumer sees: plain ones and those of committed transactions. */
  visibleRecords(): WrittenRecord[] {
    return this.records.filter((r) => r.outcome === 'plain' || r.outcome === 'committed');
  }

  private outcomeOf(transaction: number | undefined): RecordOutcome {
    if (transaction === undefined) return 'plain';
    return this.outcomes.get(transaction) ?? 'open';
  }

  /**
   * Sends records to one partition (`undefined`: the client's partitioner chooses) and resolves
   * with their offsets once all are acknowledged (with linger, after the batch is written).
   * Objects are sent as JSON; strings as they are (one line each).
   */
  async send(
    partition: number | undefined,
    values: readonly (string | object)[],
  ): Promise<bigint[]> {
    const lines: string[] = [];
    const acks: Promise<bigint>[] = [];
    for (const v of values) {
      const value = typeof v === 'string' ? v : JSON.stringify(v);
      if (/[\r\n]/.test(value)) throw new JavaProducerError('a record value must be one line');
      const seq = ++this.seq;
      lines.push(`r\t${partition ?? '-'}\t${value}\n`);
      acks.push(
        new Promise<bigint>((resolvePromise, reject) => {
          const record: PendingRecord = {
            partition,
            value,
            transaction: this.transaction,
            done: (result) => {
              if (result instanceof Error) reject(result);
              else resolvePromise(result);
            },
          };
          this.pending.set(seq, record);
        }),
      );
    }
    await this.write(lines.join(''));
    return Promise.all(acks);
  }

  /** Waits until every record sent so far is acknowledged. */
  flush(): Promise<void> {
    return this.command('flush');
  }

  async begin(): Promise<void> {
    const transaction = ++this.transactions;
    await this.command('begin');
    this.transaction = transaction;
  }

  /** Commits the open transaction (the client flushes it first). */
  async commit(): Promise<void> {
    await this.endTransaction('commit');
  }

  /** Aborts the open transaction: its records stay in the log, hidden behind an abort marker. */
  async abort(): Promise<void> {
    await this.endTransaction('abort');
  }

  private async endTransaction(how: 'commit' | 'abort'): Promise<void> {
    const transaction = this.transaction;
    if (transaction === undefined) throw new JavaProducerError(`${how} without begin`);
    await this.command(how);
    this.outcomes.set(transaction, how === 'commit' ? 'committed' : 'aborted');
    this.transaction = undefined;
  }

  /** Runs `body` in a transaction, committed if it returns and aborted if it throws. */
  async inTransaction<T>(body: () => Promise<T>): Promise<T> {
    await this.begin();
    let result: T;
    try {
      result = await body();
    } catch (error) {
      await this.abort();
      throw error;
    }
    await this.commit();
    return result;
  }

  /** Flushes, closes the client and waits for the JVM to exit. */
  async close(): Promise<void> {
    if (this.exited) return;
    await this.command('close');
    await this.exit;
  }

  /** Ends the JVM at once (clean-up after a failed test). */
  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }

  private async command(name: string): Promise<void> {
    const seq = ++this.seq;
    const answered = new Promise<void>((resolvePromise, reject) => {
      this.commands.set(seq, { resolve: resolvePromise, reject });
    });
    await this.write(`${name}\n`);
    return answered;
  }

  private async write(text: string): Promise<void> {
    if (this.exited) throw this.exited;
    if (!this.child.stdin.write(text)) {
      // One wait for all writers held up at once (a burst to every partition in one tick): a
      // listener per writer would pile up on the pipe and the process.
      this.drained ??= Promise.race([once(this.child.stdin, 'drain'), this.exit]).finally(() => {
        this.drained = undefined;
      });
      await this.drained;
    }
  }

  private onAnswer(line: string): void {
    const [kind, n, ...rest] = line.split(' ');
    if (kind === 'ready') {
      this.readyWaiter?.resolve();
      this.readyWaiter = undefined;
      return;
    }
    const seq = Number(n);
    if (kind === 'ack') {
      const record = this.pending.get(seq);
      if (!record) return;
      this.pending.delete(seq);
      const offset = BigInt(rest[1] ?? '');
      this.written.push({
        partition: Number(rest[0]),
        offset,
        value: record.value,
        transaction: record.transaction,
      });
      record.done(offset);
    } else if (kind === 'ok') {
      this.commands.get(seq)?.resolve();
      this.commands.delete(seq);
    } else if (kind === 'err') {
      const error = new JavaProducerError(rest.join(' '));
      const record = this.pending.get(seq);
      this.pending.delete(seq);
      record?.done(error);
      this.commands.get(seq)?.reject(error);
      this.commands.delete(seq);
    }
  }

  private fail(error: Error): void {
    const detail =
      this.stderrTail.length > 0 ? `; last output:\n${this.stderrTail.join('\n')}` : '';
    this.exited = new JavaProducerError(`${error.message}${detail}`);
    this.readyWaiter?.reject(this.exited);
    this.readyWaiter = undefined;
    for (const w of this.commands.values()) w.reject(this.exited);
    for (const r of this.pending.values()) r.done(this.exited);
    this.commands.clear();
    this.pending.clear();
  }
}

/** Record values of each partition in offset order, parsed as JSON: what a consumer replays. */
export function valuesByPartition<T>(
  records: WrittenRecord[],
  partitions: number[],
): Map<number, T[]> {
  return new Map(
    partitions.map((partition) => [
      partition,
      records
        .filter((r) => r.partition === partition)
        .sort((a, b) => (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0))
        .map((r) => JSON.parse(r.value) as T),
    ]),
  );
}

export function startJavaProducer(options: JavaProducerOptions): Promise<JavaProducer> {
  return JavaProducer.start(options);
}

/** Records sent at a steady rate to one partition over [fromMs, toMs) of a schedule. */
export interface ScheduleSpan {
  partition: number;
  fromMs: number;
  toMs: number;
  perSecond: number;
}

/** A burst: `count` records to one partition at once, `atMs` into the schedule. */
export interface ScheduleBurst {
  partition: number;
  atMs: number;
  count: number;
}

export interface Schedule {
  spans: ScheduleSpan[];
  bursts?: ScheduleBurst[];
  /** How often records due are sent (default 100 ms). */
  tickMs?: number;
}

/**
 * Produces a schedule in real time: each span's records spread evenly over it, each burst at its
 * time; a partition with no span over a stretch is silent then. `makeValue` builds each record
 * when it is sent (say, stamped with the current time). Resolves once the last span has ended
 * and every record is acknowledged; the producer's `records` then hold the ground truth.
 */
export async function produceOnSchedule(
  producer: JavaProducer,
  schedule: Schedule,
  makeValue: (partition: number, index: number, nowMs: number) => string | object,
  signal?: AbortSignal,
): Promise<void> {
  const tickMs = schedule.tickMs ?? 100;
  const end = Math.max(
    0,
    ...schedule.spans.map((s) => s.toMs),
    ...(schedule.bursts ?? []).map((b) => b.atMs + 1),
  );
  const spanSent = schedule.spans.map(() => 0);
  const burstSent = (schedule.bursts ?? []).map(() => false);
  const sentPerPartition = new Map<number, number>();
  const acks: Promise<bigint[]>[] = [];
  const start = Date.now();
  const sendNow = (partition: number, count: number): void => {
    if (count <= 0) return;
    const first = sentPerPartition.get(partition) ?? 0;
    sentPerPartition.set(partition, first + count);
    const now = Date.now();
    const values = Array.from({ length: count }, (_, i) => makeValue(partition, first + i, now));
    const acked = producer.send(partition, values);
    acked.catch(() => undefined); // awaited at the end; meanwhile a failure is no crash
    acks.push(acked);
  };
  for (;;) {
    if (signal?.aborted) break;
    const elapsed = Date.now() - start;
    schedule.spans.forEach((s, i) => {
      const into = Math.min(elapsed, s.toMs) - s.fromMs;
      if (into <= 0) return;
      const due = Math.floor((into * s.perSecond) / 1000);
      sendNow(s.partition, due - spanSent[i]!);
      spanSent[i] = due;
    });
    (schedule.bursts ?? []).forEach((b, i) => {
      if (burstSent[i] || elapsed < b.atMs) return;
      burstSent[i] = true;
      sendNow(b.partition, b.count);
    });
    if (elapsed >= end) break;
    await sleep(Math.min(tickMs, Math.max(1, end - elapsed)));
  }
  await Promise.all(acks);
}
