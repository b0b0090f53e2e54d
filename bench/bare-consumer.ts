// The benchmarks' plain kafkajs consumer, the baseline the receivers' fetch session is measured
// against (bench:receiver, bench:idle): what the receivers ran before it, one per cube. kafkajs
// has no assign(): a consumer in a group of its own, with the exact assigner, gets exactly the
// partitions it asks for, and so behaves like a consumer with manual assignment.
import { AssignerProtocol, type PartitionAssigner } from 'kafkajs';

export const exactAssignerName = 'StreamcubeExact';

export function exactPartitionAssigner(
  topic: string,
  partitions: () => number[],
): PartitionAssigner {
  return () => ({
    name: exactAssignerName,
    version: 1,
    assign: ({ members }) =>
      Promise.resolve(
        members.map((member) => ({
          memberId: member.memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({
            version: 1,
            assignment: { [topic]: [...partitions()].sort((a, b) => a - b) },
            userData: Buffer.alloc(0),
          }),
        })),
      ),
    protocol: ({ topics }) => ({
      name: exactAssignerName,
      metadata: AssignerProtocol.MemberMetadata.encode({
        version: 1,
        topics,
        userData: Buffer.alloc(0),
      }),
    }),
  });
}

/**
 * The bare consumer's kafkajs settings: those of the receivers' consumers before the fetch session
 * (src/kafka/fetch-session.ts) replaced them, with what was measured for each.
 */
export const consumerSettings = {
  /**
   * A receiver's group is stable (consumer-group.ts), so a member left behind by a receiver killed
   * with -9 stays in it until its session expires, and the restarted receiver's join waits for
   * that. Measured on Kafka 4.4 with kafkajs 2.2.4 (classic protocol): the join after a kill -9
   * took 26 s with a 30 s session, 5 s with 10 s, 2 s with 6 s (the broker's default
   * group.min.session.timeout.ms). 10 s keeps three heartbeats per session on a loaded machine.
   */
  sessionTimeout: 10_000,
  /**
   * kafkajs heartbeats after a fetch once this long has passed since the last heartbeat: an idle
   * consumer's fetch returned every 3 s (the receivers' wait), so a little less than that is a heartbeat
   * every fetch, about every 3 s (with 3 s, every other fetch: 6 s of a 10 s session).
   */
  heartbeatInterval: 2_500,
  /**
   * kafkajs's wait: how long it asks the broker to hold a fetch that finds nothing new, and how
   * long it sleeps between fetches when every partition is paused. The receivers' consumers
   * replaced the first with a 3 s wait and kept this short for the second: a consumer stopped (a
   * partition assigned or released) waited for the sleep under way.
   */
  maxWaitTimeInMs: 200,
  /**
   * At most this much per fetch (kafkajs's default is 10 MiB; a record batch larger than this
   * still comes whole). Every record of a fetch is decoded into objects before the first is
   * handed over, and they survive into V8's old generation, which grows far past what is live
   * before it is collected. bench:receiver (lz4): peak RSS 760-800 MiB with 10 MiB, about 520 MiB
   * with 1 MiB, at no loss of rate; the bare consumer 680 and 490 MiB.
   */
  maxBytes: 1_048_576,
} as const;
