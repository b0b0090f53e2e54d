// The Kafka consumer group of one cube on one receiver: one per (namespace, cube, receiver),
// reused by every start of its consumer, so that lag exporters (kafka_exporter, KMinion) read
// the receiver's positions from it and a restart or a move leaves no orphan group behind.

/** A DNS label (RFC 1123), what namespaces and cube names are. */
const label = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?';
const dnsLabel = new RegExp(`^${label}$`);

/**
 * `streamcube.<namespace>.<cube>.<receiver>`. Namespaces and cube names are DNS labels (no dot),
 * so the first three dots delimit them and no two cubes or receivers share an id, whatever dots
 * a receiver id holds. Kafka limits a group id to no charset; it must only be non-empty.
 */
export function consumerGroupId(namespace: string, cube: string, receiver: string): string {
  for (const [what, value] of [
    ['namespace', namespace],
    ['cube', cube],
  ] as const) {
    if (!dnsLabel.test(value))
      throw new Error(`${what} '${value}' is not a DNS label; it cannot name a consumer group`);
  }
  if (receiver.length === 0) throw new Error('an empty receiver id cannot name a consumer group');
  return `streamcube.${namespace}.${cube}.${receiver}`;
}

export interface ConsumerGroupOwner {
  namespace: string;
  cube: string;
  receiver: string;
}

const groupIdPattern = new RegExp(`^streamcube\\.(${label})\\.(${label})\\.(.+)$`);

/** The inverse of consumerGroupId: whose group this is, or undefined for any other group. */
export function consumerGroupOwner(groupId: string): ConsumerGroupOwner | undefined {
  const m = groupIdPattern.exec(groupId);
  return m ? { namespace: m[1]!, cube: m[2]!, receiver: m[3]! } : undefined;
}

/** Kafka's NON_EMPTY_GROUP (a member is in it) and GROUP_ID_NOT_FOUND (deleted already). */
export const nonEmptyGroup = 68;
export const groupIdNotFound = 69;

/**
 * The groups kafkajs's `deleteGroups` failed on, from the error it threw (it throws when any one
 * failed, with those on the error), or undefined for an error of another kind.
 */
export function failedGroups(
  error: unknown,
): { groupId: string; errorCode?: number }[] | undefined {
  return (error as { groups?: { groupId: string; errorCode?: number }[] }).groups;
}

/** The namespace of cubes assigned by a caller that names none (an operator before namespaces). */
export const defaultCubeNamespace = 'default';
