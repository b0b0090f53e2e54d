// kafkajs has no assign(): a consumer in a group of its own, with this assigner, gets exactly the
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
