// The Degraded condition of a cube and its Warning Event. The Event is recorded when the reason or
// its text is new, not on every reconcile that finds the same problem: each cube's last text is
// kept here, per cube key.
import type { CubeAssignment } from '../../api/cube-assignment.ts';
import { cubeKeyString, type CubeKey } from '../../protocol/cube-paths.ts';
import type { EventRecorder } from '../events.ts';
import type { Problem } from '../planner.ts';
import type { ConditionUpdate } from './status-writer.ts';

export class DegradedConditions {
  private readonly events: Pick<EventRecorder, 'record'>;
  /** Per cube key, the text of the last Degraded Event. */
  private readonly recorded = new Map<string, string>();

  constructor(events: Pick<EventRecorder, 'record'>) {
    this.events = events;
  }

  /**
   * Degraded=True with the problems; an Event when the reason or the Event's text is new. The text
   * leaves out figures that change with every observation (Problem.event), or each resync would
   * record an Event.
   */
  condition(object: CubeAssignment, problems: Problem[]): ConditionUpdate {
    const key = `${object.metadata?.namespace ?? 'default'}/${object.metadata?.name ?? ''}`;
    if (problems.length === 0) {
      this.recorded.delete(key);
      return {
        type: 'Degraded',
        status: 'False',
        reason: 'AsExpected',
        message: 'no problem found',
      };
    }
    const reason = problems[0]!.reason;
    const message = problems.map((p) => p.message).join('; ');
    const text = problems.map((p) => p.event ?? p.message).join('; ');
    const previous = object.status?.conditions?.find((c) => c.type === 'Degraded');
    const last = this.recorded.get(key);
    // A restarted operator has no text in memory: the condition's message stands for it, unless
    // that message carries changing figures.
    const changed =
      last === undefined
        ? previous?.message !== message && problems.every((p) => p.event === undefined)
        : last !== text;
    if (previous?.status !== 'True' || previous.reason !== reason || changed) {
      this.events.record(object, 'Warning', reason, text);
    }
    this.recorded.set(key, text);
    return { type: 'Degraded', status: 'True', reason, message };
  }

  forget(cube: CubeKey): void {
    this.recorded.delete(cubeKeyString(cube));
  }
}
