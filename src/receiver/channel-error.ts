// Errors of the receiver's domain: a reason a caller can act on and the request field at fault.
// The HTTP server maps reasons to status codes; the domain knows nothing of HTTP.

export type ChannelErrorReason =
  /** The cube or partition is not held by this receiver. */
  | 'NotFound'
  /** The request contradicts the state held (a stale epoch, a released partition, …). */
  | 'Conflict'
  /** The request itself is wrong (an unknown dimension, a body that is not JSON, …). */
  | 'Invalid'
  /** The request body is larger than the receiver accepts. */
  | 'TooLarge'
  /** The call carries a leader term lower than one already seen for the cube (leader-terms.ts). */
  | 'StaleLeader'
  /** What the call must be checked against (the API server) cannot be read now; retry. */
  | 'Unavailable';

export class ChannelError extends Error {
  override readonly name = 'ChannelError';
  readonly reason: ChannelErrorReason;
  /** The request field at fault, as a dotted path, when there is one. */
  readonly field?: string;
  constructor(reason: ChannelErrorReason, message: string, field?: string) {
    super(message);
    this.reason = reason;
    if (field !== undefined) this.field = field;
  }
}
