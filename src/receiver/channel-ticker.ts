// The periodic work of one cube, every flush interval: refresh the log ends, seal, purge, flush,
// then hand off in the background; and the count of that work under way, for whenIdle().
import type { Logger } from '../observability/logger.ts';
import type { CheckpointWriter } from './checkpoint-writer.ts';
import type { CubeConsumer } from './cube-consumer.ts';
import type { HandOffScheduler } from './hand-off-scheduler.ts';
import type { SegmentUpkeep } from './segment-upkeep.ts';

/** The log ends are asked of the broker at most this often, however short the flush interval. */
const highWatermarkRefreshMs = 2_000;

export interface ChannelTickerOptions {
  cube: string;
  intervalMs: number;
  logger: Logger;
  /** Asked for the log end of each partition. */
  consumer: Pick<CubeConsumer, 'highWatermarks'>;
  onHighWatermarks: (highWatermarks: Map<number, bigint>) => void;
  upkeep: Pick<SegmentUpkeep, 'sealReadyWindows' | 'purgeExpired'>;
  checkpoints: Pick<CheckpointWriter, 'flush'>;
  handOffs: Pick<HandOffScheduler, 'handOffSealed'>;
}

export class ChannelTicker {
  private readonly options: ChannelTickerOptions;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The periodic work under way: ticks, and the hand-off passes they started with their flush. */
  private readonly background = new Set<Promise<unknown>>();
  private lastHighWatermarkRefresh = 0;

  constructor(options: ChannelTickerOptions) {
    this.options = options;
  }

  private get log(): Logger {
    return this.options.logger;
  }

  start(): void {
    this.timer = setInterval(() => this.inBackground(this.tick()), this.options.intervalMs);
  }

  /** No tick and no hand-off pass starts from now; the closing channel flushes itself. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * A hand-off pass in the background: uploads to a slow or unreachable object store must not
   * hold sealing and flushing back. Its result is checkpointed when it ends.
   */
  startHandOffs(): void {
    if (this.stopped) return;
    const { handOffs, checkpoints } = this.options;
    this.inBackground(
      handOffs
        .handOffSealed()
        .then(() => (this.stopped ? undefined : checkpoints.flush()))
        .catch((error: unknown) =>
          this.log.error('hand-off pass failed; retrying on the next tick', {
            cube: this.options.cube,
            error: (error as Error).message,
          }),
        ),
    );
  }

  /**
   * Resolves once the periodic work under way has ended, and the work it started: a tick's
   * flush, the hand-off pass after it and the flush that records the pass. Its files are written
   * in real time, also when a test fakes the clock that starts the ticks.
   */
  async whenIdle(): Promise<void> {
    while (this.background.size > 0) await Promise.all(this.background);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.refreshHighWatermarks();
      if (this.stopped) return; // the closing channel flushes
      this.options.upkeep.sealReadyWindows();
      this.options.upkeep.purgeExpired();
      // A hand-off starts from what a checkpoint holds: a segment sealed here is durably sealed.
      await this.options.checkpoints.flush();
      this.startHandOffs();
    } catch (error) {
      this.log.error('periodic work failed; retrying on the next tick', {
        cube: this.options.cube,
        error: (error as Error).message,
      });
    }
  }

  /** Keeps periodic work that never rejects until it ends, for whenIdle(). */
  private inBackground(work: Promise<unknown>): void {
    const tracked = work.finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  private async refreshHighWatermarks(): Promise<void> {
    if (Date.now() - this.lastHighWatermarkRefresh < highWatermarkRefreshMs) return;
    this.lastHighWatermarkRefresh = Date.now();
    this.options.onHighWatermarks(await this.options.consumer.highWatermarks());
  }
}
