// The checkout saga, top to bottom: reserve the cart's stock → charge the card → email the receipt. What is undone, and
// when, is the run's undo plan (run.ts); the harness parks, decides and cancels.
import {
  type CheckoutResult,
  type CheckoutRunState,
  type CheckoutStep,
  checkoutRequestSchema,
  checkoutStateQuery,
  parseCheckoutRequest,
} from '../../contract';
import type { Resumed } from '../../saga/workflow/desk';
import { keyField, runSaga, type Saga } from '../../saga/workflow/harness';
import { sendReconciled } from '../../saga/workflow/reconciled-send';
import { isStopped } from '../../saga/workflow/run-stopped';
import { approvedRetry } from '../../saga/workflow/step-failure';
import { undoAndStop } from '../../saga/workflow/undo-from-state';
import { CheckoutRun } from './run';
import { CHECKOUT } from './steps';

export async function checkoutWorkflow(input: unknown): Promise<CheckoutResult> {
  return runSaga(SAGA, input);
}

async function checkout(run: CheckoutRun, resumed: Resumed<CheckoutStep> | null) {
  // The reservation's receipt hands the run the worker's settings: the harness pins them.
  run.reserved ??= await run.calls.step(CHECKOUT.reserve_stock, run.at('reserve_stock'));
  const charged = run.charge ?? (await charge(run));
  if (isStopped(charged)) return charged;
  run.charge = charged;
  const { paymentIntentId, amount, currency, declineCode } = charged;
  if (charged.status === 'declined') return undoAndStop(run, `the card was declined (${declineCode})`, 'charge_card');
  // A receipt whose hand-over ended unknown is sent again only on a person's retry of it, with the same Message-ID.
  const resend = approvedRetry(resumed, 'send_receipt', run.steps.get('send_receipt').error);
  const mail = { ...run.at('send_receipt'), paymentIntentId, amount, currency, ...resend };
  run.receipt ??= await run.calls.step(CHECKOUT.send_receipt, mail);
  const { workflowId, operationId, request } = run;
  return { workflowId, cartId: request.cartId, operationId, status: 'completed' as const, charge: charged };
}

/** The charge as a send reconciled by its key; a failure that charged nothing is undone. */
async function charge(run: CheckoutRun) {
  const sent = await sendReconciled(run, chargeSend(run));
  if (isStopped(sent)) return sent;
  if ('receipt' in sent) return sent.receipt;
  const { code, message } = sent.failed;
  return undoAndStop(run, `the charge failed and charged nothing (${code}: ${message})`, 'charge_card');
}

/** The charge's send, and its lookup by key (the lookup takes the send's input). */
const chargeSend = (
  run: CheckoutRun,
  input = { ...run.at('charge_card'), paymentMethod: run.request.paymentMethod },
) => ({
  step: 'charge_card' as const,
  send: () => run.calls.step(CHECKOUT.charge_card, input),
  lookUp: () =>
    run.calls
      .call('reconcile the charge', CHECKOUT.reconcile_charge, input)
      .then((found) => ({ ...found, receipt: found.charge })),
});

const SAGA: Saga<CheckoutStep, CheckoutRunState, CheckoutRun, CheckoutResult> = {
  stateQuery: checkoutStateQuery,
  start: (input) => new CheckoutRun(parseCheckoutRequest(input)),
  key: keyField('cartId', checkoutRequestSchema.shape.cartId),
  body: checkout,
  send: chargeSend,
};
