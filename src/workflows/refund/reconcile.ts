// Reconciliation of a refund whose outcome is unknown: ask the provider, and keep asking within
// the policy's lookups and the run's budget, until it says what happened. Never a blind resend:
// a resend happens only once the provider proved no refund exists, or inside the key's dedupe
// window, where the provider answers a resend with the first result.
import { sleep } from '@temporalio/workflow';
import type { ReconcileRefundInput } from '../../activities/reconcile-refund';
import type { ReconcileOutcome, ReconcileResult, RefundReceipt } from '../../contract';
import { RECONCILE_LOOKUP } from '../../compensations/registry';
import { backoffDelay, ruleFor, withJitter } from '../../reliability/policy';
import { StepFailedError } from '../../saga/workflow/step-failure';
import type { RefundRun } from './run';

type Settlement =
  | { kind: 'completed' | 'partial' | 'failed'; refund: RefundReceipt; note: string }
  /** The provider proved no refund exists for the operation: a send with the same key is safe. */
  | { kind: 'absent'; note: string }
  /** Not found yet, but still inside the key's dedupe window: a resend with the same key returns the first result. */
  | { kind: 'resubmit'; note: string }
  /** Lookups or budget ran out and the provider never said: it stays unknown. */
  | { kind: 'unknown'; note: string };

/**
 * Looks the operation up (`target`: its payment intent, what it asked for, a refund id when one is known) until the
 * answer is conclusive. `mayResubmit` is false for an earlier operation this run only waits for: this run never
 * sends another operation's request.
 */
export async function reconcile(
  run: RefundRun,
  target: ReconcileRefundInput,
  mayResubmit: boolean,
): Promise<Settlement> {
  const rule = ruleFor(run.policy, 'UNKNOWN_OUTCOME', 'may_have_executed', 'stripe');
  const started = Date.now();
  const log = run.reconciliation;
  // A lookup's result in the run's reconciliation log (the steps Query shows it).
  const noteLookup = (result: ReconcileOutcome, note: string, cursor: typeof log.cursor) => {
    log.lookups += 1;
    log.lastResult = result;
    log.lastAt = new Date().toISOString();
    if (cursor) log.cursor = cursor;
    log.history.push({ at: log.lastAt, operationId: target.operationId, result, note });
  };
  try {
    for (let lookup = 1; ; lookup++) {
      let r: ReconcileResult | undefined;
      let note: string;
      try {
        r = await run.calls.call('reconcile', RECONCILE_LOOKUP, target);
        note = r.note;
        noteLookup(r.result, note, { method: r.method, scanned: r.scanned, matches: r.matches });
      } catch (err) {
        if (!(err instanceof StepFailedError)) throw err;
        // The lookup itself failed (provider down, budget gone): this round says nothing.
        note = err.error.message;
        noteLookup('unknown', note, null);
        if (err.error.code === 'BUDGET_EXCEEDED') return { kind: 'unknown', note };
      }
      if (r?.refund && (r.result === 'completed' || r.result === 'partial' || r.result === 'failed'))
        return { kind: r.result, refund: r.refund, note };
      if (r?.result === 'not_started_confirmed') return { kind: 'absent', note };
      if (r?.result === 'not_found_inconclusive' && r.insideDedupeWindow && mayResubmit) {
        return {
          kind: 'resubmit',
          note: `not found yet, and the provider still deduplicates the key, so a resend returns the first result (${note})`,
        };
      }
      if (lookup >= rule.maxAttempts)
        return { kind: 'unknown', note: `still unknown after ${lookup} lookups: ${note}` };
      const backoff = withJitter(backoffDelay(rule, lookup), rule.jitter, Math.random());
      const untilConclusive = r?.conclusiveAt ? Date.parse(r.conclusiveAt) - Date.now() : 0;
      const wait = Math.max(backoff, untilConclusive);
      if (wait > run.budget.waitableMs())
        return { kind: 'unknown', note: `still unknown; the run's budget allows no further lookup (${note})` };
      await sleep(wait);
    }
  } finally {
    run.budget.spend({ provider: false, retryTimeMs: Date.now() - started });
  }
}
