// The refund's effect as the operation's record states it, over every send of every run: what the
// run decides its effect from and what `inspect` checks against. Pure, shared by workflow and client code.

/** What the operation's record holds of its sends: how many went out, how many are proven to have had no effect, and any receipt. */
export interface SendRecord {
  status: string;
  requestsSent: number;
  provenAbsentThrough: number | null;
  refund?: { refundId: string } | null;
}

export interface RecordedEffect {
  status: 'none' | 'unknown' | 'refunded' | 'partial' | 'failed';
  /** Why, in words for the run's reason and for `inspect`. */
  why: string;
}

/**
 * A receipt says what it is; a send whose outcome is open (not proven to have had no effect) means a
 * refund may exist, whatever the last attempt said; only with every send settled was nothing refunded.
 */
export function effectOfRecord(op: SendRecord): RecordedEffect {
  if (op.refund) {
    const status = op.status === 'partial' || op.status === 'failed' ? op.status : 'refunded';
    return { status, why: `refund ${op.refund.refundId} is on the operation's record (${op.status})` };
  }
  const open = op.requestsSent - (op.provenAbsentThrough ?? 0);
  if (op.status === 'unknown' || open > 0)
    return {
      status: 'unknown',
      why: `its record holds ${op.requestsSent} send(s), ${Math.max(open, 1)} not proven to have had no effect (status ${op.status}): a refund may exist`,
    };
  return {
    status: 'none',
    why: op.requestsSent
      ? `each of its ${op.requestsSent} send(s) is proven to have had no effect`
      : 'it was never sent',
  };
}
