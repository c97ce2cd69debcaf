// The checkout saga, top to bottom: reserve the cart's stock → charge the card → email the receipt.
// A decline, or a charge that fails for good, puts the stock back and ends compensated. A person's
// compensate (or a cancellation) after the charge refunds it, puts the stock back and corrects a
// receipt that may have gone out, each under its own key. The harness parks, decides and cancels.
import { CancellationScope, workflowInfo } from '@temporalio/workflow';
import {
  type ChargeReceipt,
  type CheckoutResult,
  type CheckoutRunState,
  type CheckoutStep,
  checkoutRequestSchema,
  checkoutStateQuery,
  parseCheckoutRequest,
  MAX_RESUBMISSIONS,
} from '../../contract';
import { audit, type Resumed, runSaga, type Saga } from '../../saga/workflow/harness';
import { stop } from '../../saga/workflow/run-stopped';
import { mayHaveTakenEffect } from '../../reliability/attempt-ledger';
import { judgedHandOver, StepFailedError, type StepError } from '../../saga/workflow/step-failure';
import { undoSteps } from '../../saga/workflow/undo';
import { showRejected } from '../../saga/workflow/visibility';
import { REFUND_ATTRIBUTES } from '../refund/run';
import { CheckoutRun } from './run';
import { CHECKOUT } from './steps';

type ChargeInput = { key: string; operationId: string; cartId: string; paymentMethod: string };

export async function checkoutWorkflow(input: unknown): Promise<CheckoutResult> {
  return runSaga(SAGA, input);
}

async function checkout(run: CheckoutRun, resumed: Resumed<CheckoutStep> | null): Promise<CheckoutResult> {
  const { cartId, paymentMethod } = run.request;
  const at = (step: CheckoutStep) => ({ key: run.key(step), operationId: run.operationId, cartId });
  run.reserved ??= await step(run, 'reserve_stock', () => run.calls.step(CHECKOUT.reserve_stock, at('reserve_stock')));
  run.charge ??= await charge(run, { ...at('charge_card'), paymentMethod });
  const { paymentIntentId, amount, currency, declineCode } = run.charge;
  if (run.charge.status === 'declined')
    return stopCompensated(run, `the card was declined (${declineCode})`, 'charge_card');
  // A receipt whose hand-over ended unknown is sent again only on a person's retry of it, with the same Message-ID.
  const unknown = run.steps.get('send_receipt').error;
  const resend =
    resumed?.kind === 'retry-step' && resumed.step === 'send_receipt' && unknown
      ? { resendApprovedAt: resumed.record.at, ...judgedHandOver(unknown) }
      : {};
  const mail = { ...at('send_receipt'), paymentIntentId, amount, currency, ...resend };
  run.receipt ??= await step(run, 'send_receipt', () => run.calls.step(CHECKOUT.send_receipt, mail));
  return { workflowId: run.workflowId, cartId, operationId: run.operationId, status: 'completed', charge: run.charge };
}

/**
 * Sends the charge. After a failure any attempt of which may have charged, only the provider says it did not: found,
 * its receipt; proven absent, an unknown outcome is sent again and a failure for good is undone; unknown, a person.
 */
async function charge(run: CheckoutRun, input: ChargeInput): Promise<ChargeReceipt> {
  for (let resent = 0; ; resent++) {
    let failure: StepError;
    try {
      return settled(run, await run.calls.step(CHECKOUT.charge_card, input));
    } catch (err) {
      if (!(err instanceof StepFailedError)) throw err;
      failure = err.error;
    }
    const mayHaveCharged =
      failure.certainty !== 'not_executed' || run.steps.get('charge_card').ledger.some(mayHaveTakenEffect);
    const found = mayHaveCharged ? await lookUp(run) : 'absent';
    if (found === 'unknown') return stop('needs_attention', UNKNOWN_CHARGE, 'charge_card', true);
    if (found !== 'absent') return found;
    const what = `${failure.code}: ${failure.message}`;
    if (failure.certainty === 'not_executed')
      return stopCompensated(run, `the charge failed and charged nothing (${what})`, 'charge_card');
    if (resent >= MAX_RESUBMISSIONS)
      return stop(
        'needs_attention',
        `the charge was proven absent ${resent + 1} times; a person decides`,
        'charge_card',
      );
    run.setStatus('running', 'charge_card');
  }
}

const UNKNOWN_CHARGE = "the charge's outcome is unknown: reconcile again (the sweep does), or retry-step charge_card";

/** Asks the provider what became of the charge: its receipt, `absent` (proven), or `unknown`. */
async function lookUp(run: CheckoutRun): Promise<ChargeReceipt | 'absent' | 'unknown'> {
  run.effect = { status: 'unknown', certainty: run.lastFailure?.certainty ?? 'undeterminable' };
  run.setStatus('reconciling', 'charge_card');
  const input = { key: run.key('charge_card'), operationId: run.operationId, cartId: run.request.cartId };
  const found = await run.calls.call('reconcile the charge', CHECKOUT.reconcile_charge, input).catch((err: unknown) => {
    if (!(err instanceof StepFailedError)) throw err;
    return { kind: 'unknown' as const, charge: null, note: err.error.message };
  });
  run.steps.note('charge_card', found.note);
  if (found.charge) {
    run.steps.resolve('charge_card', found.charge, `receipt from reconciliation: ${found.note}`);
    return settled(run, found.charge);
  }
  if (found.kind === 'absent') run.effect = { status: 'none', certainty: 'not_executed' };
  return found.kind === 'absent' ? 'absent' : 'unknown';
}

function settled(run: CheckoutRun, charge: ChargeReceipt): ChargeReceipt {
  run.effect = { status: charge.status === 'succeeded' ? 'charged' : 'declined', certainty: 'completed' };
  run.setStatus('running', 'charge_card');
  return charge;
}

/** Runs the reservation or the receipt; a failure stops the run as it means for the checkout. */
async function step<T>(run: CheckoutRun, name: 'reserve_stock' | 'send_receipt', call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof StepFailedError)) throw err;
    const e: StepError = err.error;
    const unknown = e.certainty !== 'not_executed';
    if (name === 'reserve_stock' && !unknown && (e.code === 'PERMANENT_BUSINESS' || e.code === 'INVALID_ARGUMENTS'))
      return stop(
        'rejected',
        `cart ${run.request.cartId} cannot be checked out: ${e.message}. Nothing was charged`,
        name,
      );
    const what =
      name === 'send_receipt'
        ? `the receipt ${unknown ? 'may have gone out' : 'was not sent'}; the charge stands`
        : 'nothing was charged';
    return stop(
      'needs_attention',
      `${name} failed (${e.code}: ${e.message}): ${what}. retry-step ${name}, or compensate`,
      name,
      unknown,
    );
  }
}

/**
 * Undoes what stands (compensations never stop for a cancellation); the outcome as a value: compensated, or for a
 * person. The refund comes first: the correction tells the customer their money is back, never before it is.
 */
async function compensate(run: CheckoutRun, why: string, resendApprovedAt?: string) {
  run.setStatus('compensating');
  const plan = run.undoPlan(resendApprovedAt);
  await CancellationScope.nonCancellable(async () => {
    await undoSteps(
      run,
      plan.filter((p) => p.step !== 'send_receipt'),
    );
    if (!run.refundOpen())
      await undoSteps(
        run,
        plan.filter((p) => p.step === 'send_receipt'),
      );
  });
  const open = run.openUndos();
  if (run.charge?.status === 'succeeded' && !run.refundOpen())
    run.effect = { status: 'refunded', certainty: 'completed' };
  const undone = run.steps
    .table()
    .filter((s) => s.compensation?.status === 'completed')
    .map((s) => `${s.name} (key ${s.compensation!.key})`);
  return open.length === 0
    ? { status: 'compensated' as const, reason: `${why}. Undone: ${undone.join(', ') || 'nothing stood'}`, open }
    : {
        status: 'needs_attention' as const,
        reason: `${why}. Not undone: ${open.join(', ')}; a person finishes it`,
        open,
      };
}

async function stopCompensated(run: CheckoutRun, why: string, at: CheckoutStep): Promise<never> {
  const { status, reason, open } = await compensate(run, why);
  return stop(status, reason, open[0] ?? at, open.length > 0);
}

const SAGA: Saga<CheckoutStep, CheckoutRunState, CheckoutRun, CheckoutResult> = {
  stateQuery: checkoutStateQuery,
  // The run counters are the refund's (refund_runs_*); the checkout's are its steps' attempts and requests.
  metrics: () => ({ runStarted() {}, runEnded() {}, runParked() {} }),
  start: (input) => new CheckoutRun(parseCheckoutRequest(input)),
  rejected(input, reason) {
    const cartId =
      checkoutRequestSchema.shape.cartId.safeParse((input as { cartId?: unknown } | null)?.cartId).data ?? null;
    showRejected(REFUND_ATTRIBUTES, cartId, reason);
    return {
      workflowId: workflowInfo().workflowId,
      cartId,
      operationId: null,
      status: 'rejected',
      reason,
      failedStep: null,
    };
  },
  body: checkout,
  async prepare(run, chosen) {
    if (chosen.kind === 'compensate')
      return stopCompensated(run, `compensated as ${chosen.record.by} decided: ${chosen.record.reason}`, 'charge_card');
    if (chosen.kind !== 'reconcile') return;
    const found = await lookUp(run);
    if (found === 'unknown') stop('needs_attention', UNKNOWN_CHARGE, 'charge_card', true);
    if (found === 'absent')
      stop(
        'needs_attention',
        'the charge was proven absent: nothing was charged. retry-step charge_card sends it, compensate puts the stock back',
        'charge_card',
      );
  },
  ended: (run, status, reason, failedStep) => ({
    workflowId: run.workflowId,
    cartId: run.request.cartId,
    operationId: run.operationId,
    status,
    reason,
    failedStep,
  }),
  afterEnd: async () => undefined,
  async cancelled(run) {
    const was = run.status;
    const taken = run.takenDecision();
    let reason = `cancelled while ${was}`;
    // A charge that had started may be going on at the provider: it is asked, never taken for "not sent".
    const charge = !run.charge && run.steps.get('charge_card').status !== 'pending' ? await lookUp(run) : undefined;
    if (charge && charge !== 'absent' && charge !== 'unknown') run.charge = charge;
    if (taken?.kind === 'abandon')
      run.end('abandoned', (reason = `${reason}, after ${taken.record.by} abandoned it: ${taken.record.reason}`), null);
    else if (charge === 'unknown') {
      run.finish(
        'needs_attention',
        (reason = `${reason}: the charge is unknown; a person reconciles it`),
        'charge_card',
      );
      run.flagForAttention();
    } else {
      const done = await compensate(run, reason, taken?.kind === 'compensate' ? taken.record.at : undefined);
      reason = done.reason;
      if (done.status === 'compensated') run.end(run.reserved || run.charge ? 'compensated' : 'stopped', reason, null);
      else {
        run.finish('needs_attention', reason, done.open[0] ?? null);
        run.flagForAttention();
      }
    }
    await audit(run, 'cancelled', reason, null);
  },
};
