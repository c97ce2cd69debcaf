// A chaos run: many refunds and checkouts through the real stack while faults are injected, workers are killed
// and restarted and starts are duplicated; then the invariants are checked from the evidence (the
// Stripe server's ledger and request log, the mailbox, the store, the runs' own state).
import { WorkflowHandle } from '@temporalio/client';
import { RECONCILED_FROM_LOG } from '../../../src/activities/message-log';
import { outcomeOf, type RunOutcome } from '../../../src/client/outcome';
import { startRefund } from '../../../src/client/refunds';
import { seedPaidOrder } from '../shop/orders';
import {
  checkoutWorkflowId,
  followUpWorkflowId,
  MAX_RESUBMISSIONS,
  messageIdForKey,
  operationId as operationIdOf,
  REFUND_WORKFLOW,
  refundWorkflowId,
  SEARCH_ATTRIBUTES,
  stepKey,
  stepsQuery,
  TASK_QUEUE,
  type FollowUpWorkflow,
  type RefundRunState,
  type RefundWorkflow,
} from '../../../src/contract';
import { compensationKeyOf } from '../../../src/compensations/plan';
import { CHAOS_POLICY, getJson, startChaosStack, type ChaosStack } from './chaos-stack';
import { checkCheckouts, startCheckout, type CheckoutRecord } from './checkouts';
import { fail, invariant, summarizeOutcome, type Invariant, type RunOutcomeSummary } from './invariant';

export type { Invariant, RunOutcomeSummary } from './invariant';
import { seededRandom, startFaultInjector } from './faults';
import type { ToxiproxyCrash } from './toxiproxy';
import type { Dialect } from '../../../src/store';

export interface ChaosOptions {
  runs: number;
  concurrency: number;
  /** The chance, at each fault tick (every 250 ms), that a fault is injected. */
  faultRate: number;
  /** Every this often a random worker is SIGKILLed and replaced; 0: never. */
  killEveryMs: number;
  workers: number;
  /** The share of runs started twice at once under the same id, and again under another id. */
  duplicateRate: number;
  seed: number;
  /** Refunds are started and faults injected within this; then the runs get `graceMs` to settle. */
  timeLimitMs: number;
  graceMs: number;
  dir: string;
  /** The order store the workers share (default sqlite). */
  database?: Dialect;
  /** The workflow bundle the workers load (bundleRefundWorkflows' code); built here unless given. */
  workflowBundle?: string;
}

export interface RunRecord {
  index: number;
  orderId: string;
  paymentIntentId: string;
  email: string;
  amount: number;
  paymentMethod: string;
  workflowIds: string[];
  outcomes: (RunOutcomeSummary | null)[];
}

export interface ChaosReport {
  options: Omit<ChaosOptions, 'dir'>;
  startedAt: string;
  durationMs: number;
  outcomes: Record<string, number>;
  /** Every run that did not complete: where it ended and why, as it says itself. */
  notCompleted: { workflowId: string; status: string; effect?: string; reason: string }[];
  faults: Record<string, number>;
  /** Workers SIGKILLed: by the kill interval, and all of them right after Stripe made a refund. */
  workerKills: number;
  duplicateStarts: { sameId: number; otherId: number };
  /** toxiproxy-server exits we did not ask for; each time it was started again with the same proxies (see toxiproxy.ts). */
  toxiproxyCrashes: ToxiproxyCrash[];
  /** Emails whose hand-over was unknown, settled from the mail server's message log without a person. */
  handOversReconciled: number;
  invariants: Invariant[];
  holds: boolean;
}

/** The run's own calls (seeding an order, starting a refund) are idempotent: a few tries ride out a fault. */
async function retried<T>(fn: () => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= tries) throw err;
      await sleep(500 * attempt);
    }
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(
  opts: ChaosOptions,
  onProgress: (settled: number, total: number) => void = () => undefined,
): Promise<ChaosReport> {
  const startedAt = new Date();
  const random = seededRandom(opts.seed);
  const stack = await startChaosStack({
    dir: opts.dir,
    workers: opts.workers,
    database: opts.database,
    workflowBundle: opts.workflowBundle,
  });
  try {
    const deadline = Date.now() + opts.timeLimitMs;
    const faults = startFaultInjector(stack, {
      rate: opts.faultRate,
      everyMs: 250,
      random: seededRandom(opts.seed + 1),
    });
    let kills = 0;
    let killing = opts.killEveryMs > 0;
    let killFailure: Error | undefined;
    const killer = (async () => {
      const pick = seededRandom(opts.seed + 2);
      while (killing) {
        await sleep(opts.killEveryMs);
        if (!killing) break;
        await stack.replaceWorker(Math.floor(pick() * stack.workers.length));
        kills += 1;
      }
    })().catch((err: unknown) => {
      killing = false;
      killFailure = err as Error;
    });

    const records: RunRecord[] = [];
    const duplicates = { sameId: 0, otherId: 0 };
    let settled = 0;
    let next = 0;
    /** The run's outcome, or null if it has none by `until`: nothing is left polling after that. A failed run is an outcome too. */
    const settle = async (
      handle: WorkflowHandle<RefundWorkflow>,
      until: number,
    ): Promise<RunOutcome | Error | null> => {
      const give = AbortSignal.timeout(Math.max(1, until - Date.now()));
      return outcomeOf(handle, 500, give).catch((err: unknown) => (give.aborted ? null : (err as Error)));
    };
    const pending: { record: RunRecord; slot: number; handle: WorkflowHandle<RefundWorkflow> }[] = [];
    const checkouts: CheckoutRecord[] = [];
    const pendingCheckouts: { record: CheckoutRecord; handle: WorkflowHandle<RefundWorkflow> }[] = [];

    // Halfway through the runs, a worker is killed if none has been yet: a run shorter than the interval meets one too.
    let halfwayKill: Promise<void> | undefined;
    const drive = async () => {
      while (next < opts.runs && Date.now() < deadline) {
        const index = next++;
        if (opts.killEveryMs > 0 && index === Math.floor(opts.runs / 2) && kills + stack.killedAfterRefund === 0)
          halfwayKill = stack.replaceWorker(0).then(
            () => void (kills += 1),
            (err: unknown) => void (killFailure = err as Error),
          );
        try {
          await driveOne(index);
        } catch (err) {
          // Seeding or starting failed through every retry: the run is recorded as lost, and the others go on.
          const orderId = `chaos-${opts.seed}-${index}`;
          const lost: RunOutcomeSummary = { kind: 'error', status: 'error', reason: (err as Error).message };
          const seeded = records.find((r) => r.index === index);
          if (seeded && !seeded.workflowIds.length) seeded.workflowIds.push(refundWorkflowId(orderId, 1));
          if (seeded) seeded.outcomes = seeded.workflowIds.map(() => lost);
          else
            records.push({
              index,
              orderId,
              paymentIntentId: '',
              email: `${orderId}@example.test`,
              amount: 0,
              paymentMethod: '',
              workflowIds: [refundWorkflowId(orderId, 1)],
              outcomes: [lost],
            });
        }
        settled += 1;
        onProgress(settled, opts.runs);
      }
    };
    const driveOne = async (index: number) => {
      // Every fourth run is a checkout, some with a card that declines, some started twice.
      if (index % 4 === 3) {
        const cartId = `chaos-${opts.seed}-${index}-cart`;
        const [declines, twice] = [random() < 0.15, random() < opts.duplicateRate];
        const { record, handle } = await retried(() => startCheckout(stack, cartId, declines, twice));
        checkouts.push(record);
        const outcome = await settle(handle, deadline);
        record.outcome = summarizeOutcome(outcome);
        if (!outcome) pendingCheckouts.push({ record, handle });
        return;
      }
      const orderId = `chaos-${opts.seed}-${index}`;
      const paymentMethod = random() < 0.1 ? 'pm_card_refundFail' : 'pm_card_visa';
      const sameId = random() < opts.duplicateRate;
      const otherId = random() < opts.duplicateRate / 2;
      const amount = 500 + Math.floor(random() * 40) * 100;
      const email = `${orderId}@example.test`;
      const order = await retried(() =>
        seedPaidOrder(
          stack.stripe,
          stack.store,
          { orderId, amount: 5000, currency: 'usd', customerEmail: email },
          paymentMethod,
        ),
      );
      const record: RunRecord = {
        index,
        orderId,
        paymentIntentId: order.paymentIntentId,
        email,
        amount,
        paymentMethod,
        workflowIds: [],
        outcomes: [],
      };
      records.push(record);
      const request = { orderId, amount, currency: 'usd', requestedBy: 'chaos' };
      const starts = [retried(() => startRefund(stack.client, request))];
      if (sameId) starts.push(retried(() => startRefund(stack.client, request)));
      const [first] = await Promise.all(starts);
      record.workflowIds.push(first!.workflowId);
      const handles = [first!.handle];
      if (sameId) duplicates.sameId += 1;
      if (otherId) {
        const again = await retried(() =>
          stack.client.workflow.start<RefundWorkflow>(REFUND_WORKFLOW, {
            taskQueue: TASK_QUEUE,
            workflowId: `${first!.workflowId}-again`,
            args: [request],
          }),
        );
        record.workflowIds.push(again.workflowId);
        handles.push(again);
        duplicates.otherId += 1;
      }
      const outcomes = await Promise.all(handles.map((h) => settle(h, deadline)));
      record.outcomes = outcomes.map(summarizeOutcome);
      outcomes.forEach((o, slot) => {
        if (!o) pending.push({ record, slot, handle: handles[slot]! });
      });
    };
    await Promise.all(Array.from({ length: opts.concurrency }, drive));

    // The faults stop; every run still going gets the grace period to settle on a healthy stack.
    killing = false;
    await Promise.all([killer, halfwayKill]);
    await faults.stop();
    if (killFailure) throw new Error(`a killed worker could not be replaced: ${killFailure.message}`);
    const graceEnd = Date.now() + opts.graceMs;
    await Promise.all([
      ...pending.map(async (p) => (p.record.outcomes[p.slot] = summarizeOutcome(await settle(p.handle, graceEnd)))),
      ...pendingCheckouts.map(async (p) => (p.record.outcome = summarizeOutcome(await settle(p.handle, graceEnd)))),
    ]);

    const invariants = [...(await checkInvariants(stack, records)), ...(await checkCheckouts(stack, checkouts))];
    const handOversReconciled = await reconciledHandOvers(stack, records);
    const outcomes: Record<string, number> = {};
    for (const r of records)
      for (const o of r.outcomes) {
        const key = o ? (o.kind === 'parked' ? `parked (${o.status})` : o.status) : 'not settled';
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    for (const { outcome: o } of checkouts) {
      const key = `checkout ${o ? (o.kind === 'parked' ? `parked (${o.status})` : o.status) : 'not settled'}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    }
    const notCompleted = records.flatMap((r) =>
      r.outcomes.flatMap((o, slot) =>
        o?.status === 'completed'
          ? []
          : [
              {
                workflowId: r.workflowIds[slot]!,
                status: o ? o.status : 'not settled',
                ...(o?.kind === 'parked' && { effect: o.effect }),
                reason: o?.reason ?? '',
              },
            ],
      ),
    );
    for (const { cartId, outcome: o } of checkouts)
      if (o?.status !== 'completed')
        notCompleted.push({
          workflowId: checkoutWorkflowId(cartId),
          status: o ? o.status : 'not settled',
          ...(o?.kind === 'parked' && { effect: o.effect }),
          reason: o?.reason ?? '',
        });
    return {
      options: { ...opts, dir: undefined } as ChaosReport['options'],
      notCompleted,
      startedAt: startedAt.toISOString(),
      durationMs: Date.now() - startedAt.getTime(),
      outcomes,
      faults: faults.injected,
      workerKills: kills + stack.killedAfterRefund,
      duplicateStarts: duplicates,
      toxiproxyCrashes: [...stack.toxiproxy.crashes],
      handOversReconciled,
      invariants,
      holds: invariants.every((i) => i.holds),
    };
  } finally {
    await stack.close();
  }
}

/** The runs' emails (notice and correction) the outbox records as settled from the message log. */
async function reconciledHandOvers(stack: ChaosStack, records: RunRecord[]): Promise<number> {
  const keys = records.flatMap((r) => {
    const operationId = operationIdOf('chaos', r.orderId, 1);
    return [stepKey(operationId, 'notify_customer'), compensationKeyOf('notify_customer', operationId)];
  });
  const entries = await Promise.all(keys.map((key) => stack.store.getNotification(key)));
  return entries.filter((e) => e?.providerResponse?.startsWith(RECONCILED_FROM_LOG)).length;
}

/** The invariants, each checked for every run from where its effects landed. */
export async function checkInvariants(stack: ChaosStack, records: RunRecord[]): Promise<Invariant[]> {
  const inv = invariant;
  const duplicateRefunds = inv('zero duplicate refunds (Stripe ledger)');
  const duplicateEmails = inv('zero duplicate emails (SMTP mailbox)');
  const lost = inv('zero lost runs: completed, compensated, rejected, or parked with a verdict');
  const budget = inv('attempts within budget (run state)');
  const storm = inv('no retry storm: requests per create key within the policy bound');
  const honest = inv('run state matches the evidence');
  const corrected = inv(
    'no silent compensation: a run or follow-up that ends compensated corrected each notice the mailbox holds for it, or is on the attention list',
  );
  const { maxStepAttempts, providerCalls } = CHAOS_POLICY.budget;
  const requestBound = maxStepAttempts * (MAX_RESUBMISSIONS + 1);

  for (const r of records) {
    if (!r.paymentIntentId) {
      // Never seeded or started: nothing landed anywhere, and the run is lost.
      lost.checked += 1;
      fail(lost, `${r.orderId}: ${r.outcomes[0]?.reason ?? 'not started'}`);
      continue;
    }
    const operationId = operationIdOf('chaos', r.orderId, 1);
    const createKey = stepKey(operationId, 'create_refund');
    const { effects } = await getJson<{ effects: { type: string; idempotencyKey: string | null }[] }>(
      `${stack.stripeUrl}/_ledger?payment_intent=${r.paymentIntentId}`,
    );
    const refunds = effects.filter((e) => e.type === 'refund.created');
    duplicateRefunds.checked += 1;
    if (refunds.length > 1) fail(duplicateRefunds, `${r.orderId}: ${refunds.length} refunds`);

    const { messages } = await getJson<{ messages: { messageId: string; subject: string }[] }>(
      `${stack.mail.apiUrl}/messages?to=${encodeURIComponent(r.email)}`,
    );
    const corrections = messages.filter((m) => /^Correction: /.test(m.subject)).length;
    const notices = messages.length - corrections;
    duplicateEmails.checked += 1;
    if (notices > 1 || corrections > 1 || new Set(messages.map((m) => m.messageId)).size !== messages.length) {
      fail(duplicateEmails, `${r.orderId}: ${notices} notices, ${corrections} corrections`);
    }

    const requests = (
      await getJson<{ requests: unknown[] }>(
        `${stack.stripeUrl}/_requests?idempotency_key=${encodeURIComponent(createKey)}`,
      )
    ).requests.length;
    storm.checked += 1;
    if (requests > requestBound)
      fail(storm, `${r.orderId}: ${requests} requests with ${createKey} (bound ${requestBound})`);

    const [order, op] = await Promise.all([stack.store.getOrder(r.orderId), stack.store.operations.get(operationId)]);
    // The notice and its correction by Message-ID: a notice the mailbox holds without its correction was never put right.
    const uncorrected =
      messages.some((m) => m.messageId === messageIdForKey(stepKey(operationId, 'notify_customer'))) &&
      !messages.some((m) => m.messageId === messageIdForKey(compensationKeyOf('notify_customer', operationId)));
    const followUp = await followUpOutcome(stack, operationId);
    if (followUp) {
      corrected.checked += 1;
      if (followUp.status === 'compensated' && uncorrected && !followUp.flagged)
        fail(
          corrected,
          `${followUpWorkflowId(operationId)}: compensated, and the notice in the mailbox has no correction`,
        );
    }
    for (const [slot, workflowId] of r.workflowIds.entries()) {
      const outcome = r.outcomes[slot] ?? null;
      lost.checked += 1;
      if (!outcome) {
        fail(lost, `${workflowId}: not settled within the time limit and grace`);
        continue;
      }
      if (outcome.kind === 'parked' && !outcome.verdict) fail(lost, `${workflowId}: parked without a verdict`);
      if (outcome.kind === 'error') {
        fail(lost, `${workflowId}: ${outcome.reason}`);
        continue;
      }
      // A query needs a worker to replay the run: one being replaced, or a busy one, is asked again.
      const handle = stack.client.workflow.getHandle(workflowId);
      const state = await retried(() => handle.query(stepsQuery)).catch(() => null);
      budget.checked += 1;
      if (!state) fail(budget, `${workflowId}: its state could not be queried`);
      else budgetProblems(state, providerCalls, maxStepAttempts).forEach((p) => fail(budget, `${workflowId}: ${p}`));

      honest.checked += 1;
      const status = outcome.status;
      const refunded = order?.refundedAmount ?? -1;
      const problems: string[] = [];
      if (status === 'completed') {
        if (refunds.length !== 1) problems.push(`completed with ${refunds.length} refunds in the ledger`);
        if (refunded !== r.amount) problems.push(`completed, but the order shows ${refunded} refunded of ${r.amount}`);
        if (notices !== 1) problems.push(`completed with ${notices} notices in the mailbox`);
        if (op?.status !== 'completed') problems.push(`completed, but the operation is ${op?.status}`);
      } else if (status === 'compensated') {
        corrected.checked += 1;
        const flagged =
          (
            await stack.client.workflow
              .getHandle(workflowId)
              .describe()
              .catch(() => null)
          )?.typedSearchAttributes.get(SEARCH_ATTRIBUTES.needsAttention) === true;
        if (uncorrected && !flagged)
          fail(corrected, `${workflowId}: compensated, and the notice in the mailbox has no correction`);
        if (refunded !== 0) problems.push(`compensated, but the order shows ${refunded} refunded`);
        if (corrections !== notices)
          problems.push(`compensated with ${notices} notices and ${corrections} corrections`);
      } else if (status === 'rejected') {
        if (refunds.length !== 0) problems.push(`rejected with ${refunds.length} refunds in the ledger`);
      } else if (outcome.kind === 'parked') {
        if (outcome.effect === 'unknown' && op?.refund)
          problems.push(`parked as unknown, but the store holds receipt ${op.refund.refundId}`);
        if (outcome.effect === 'refunded' && refunds.length !== 1)
          problems.push(`parked as refunded with ${refunds.length} refunds in the ledger`);
        if (outcome.effect === 'none' && refunds.length !== 0)
          problems.push(`parked saying nothing was refunded, with ${refunds.length} refunds in the ledger`);
      }
      problems.forEach((p) => fail(honest, `${workflowId}: ${p}`));
    }
  }
  return [duplicateRefunds, duplicateEmails, lost, budget, storm, honest, corrected];
}

/** How the operation's follow-up run ended, when one ran and has ended: its status, and whether it is on the attention list. */
async function followUpOutcome(
  stack: ChaosStack,
  operationId: string,
): Promise<{ status: string; flagged: boolean } | null> {
  const handle = stack.client.workflow.getHandle<FollowUpWorkflow>(followUpWorkflowId(operationId));
  const described = await handle.describe().catch(() => null);
  if (!described || described.status.name !== 'COMPLETED') return null;
  const { status } = await handle.result();
  return { status, flagged: described.typedSearchAttributes.get(SEARCH_ATTRIBUTES.needsAttention) === true };
}

/** What in a run's state exceeds its budget: provider calls, or attempts of one step (a resubmitted create may run its attempts again). */
function budgetProblems(state: RefundRunState, providerCalls: number, maxStepAttempts: number): string[] {
  const out: string[] = [];
  if (state.budget.providerCallsUsed > Math.max(providerCalls, state.budget.providerCallLimit)) {
    // Which steps spent them, and whether the run waited for its provider (its polls are essential, outside the call budget).
    const spent = state.steps
      .filter((s) => s.attempts > 0)
      .map((s) => `${s.name} ×${s.attempts}`)
      .join(', ');
    out.push(
      `${state.budget.providerCallsUsed} provider calls of ${state.budget.providerCallLimit} (steps: ${spent}; status ${state.status}, effect ${state.effect.status})`,
    );
  }
  for (const step of state.steps) {
    const bound = step.name === 'create_refund' ? maxStepAttempts * (MAX_RESUBMISSIONS + 1) : maxStepAttempts;
    if (step.attempts > bound) out.push(`${step.name}: ${step.attempts} attempts (bound ${bound})`);
  }
  return out;
}
