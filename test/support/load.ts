// Steady load for operator tests: a producer loop writing test events to every partition until
// stopped, remembering what it wrote as the ground truth.
import type { Producer } from 'kafkajs';
import { makeEvents, type TestEvent } from './events.ts';

export class SteadyLoad {
  readonly produced = new Map<number, TestEvent[]>();
  private running = false;
  private loop: Promise<void> | undefined;
  private round = 0;
  /** While set, the loop waits before its next round (pause()). */
  private paused: { resume: Promise<void>; release: () => void } | undefined;
  /** The round being sent, if any. */
  private sending: Promise<unknown> | undefined;

  private producer: Producer;
  private readonly topic: string;
  private partitions: number;
  private readonly perRound: number;
  private readonly pauseMs: number;

  constructor(producer: Producer, topic: string, partitions: number, perRound = 20, pauseMs = 50) {
    this.producer = producer;
    this.topic = topic;
    this.partitions = partitions;
    this.perRound = perRound;
    this.pauseMs = pauseMs;
  }

  start(start: number): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const messages: { partition: number; value: string }[] = [];
        for (let p = 0; p < this.partitions; p++) {
          const events = makeEvents(
            p,
            this.perRound,
            start + this.round * this.perRound * 100,
            100,
            this.round,
          );
          (this.produced.get(p) ?? this.produced.set(p, []).get(p)!).push(...events);
          for (const e of events) messages.push({ partition: p, value: JSON.stringify(e) });
        }
        this.round += 1;
        this.sending = this.producer.send({ topic: this.topic, acks: -1, messages });
        await this.sending;
        this.sending = undefined;
        await new Promise((r) => setTimeout(r, this.pauseMs));
        if (this.paused) await this.paused.resume;
      }
    })();
    // A send that fails (the broker stopped under a test that failed mid-way) rejects the loop
    // before stop() awaits it: marked handled here, so that it fails stop() and not, as an
    // unhandled rejection, the whole jest run.
    this.loop.catch(() => undefined);
  }

  /**
   * From the next round on, also writes to partitions added to the topic, through `producer`: a
   * client that read the topic's metadata after they were added (kafkajs keeps it for minutes).
   */
  grow(partitions: number, producer: Producer): void {
    this.producer = producer;
    this.partitions = partitions;
  }

  /**
   * Holds the loop before its next round, once the round being sent is written: the ground truth
   * stays exact through an outage of the broker (a send cut short would leave it unknown).
   */
  async pause(): Promise<void> {
    if (!this.paused) {
      let release = (): void => undefined;
      const resume = new Promise<void>((r) => (release = r));
      this.paused = { resume, release };
    }
    await this.sending;
  }

  resume(): void {
    const paused = this.paused;
    this.paused = undefined;
    paused?.release();
  }

  /** Rounds written so far. */
  get rounds(): number {
    return this.round;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.resume();
    await this.loop;
  }

  all(): TestEvent[] {
    return [...this.produced.values()].flat();
  }
}
