// The attempt runner: the one place an activity's failure is shaped. Its retry decision follows
// the policy: jitter through nextRetryDelay, Retry-After as a floor, the budget as a ceiling.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Classified, createAttemptRunner, recordingEffect, type Attempt } from '../../src/activities/attempt';
import type Stripe from 'stripe';
import { createStripeClient, stripeIn } from '../../src/activities/stripe-client';
import { StripeTransport } from '../../src/activities/stripe-transport';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { openStore } from '../../src/store';
import { activityEnv, detailsOf, failureOf } from '../helpers/activity-env';

let store: Awaited<ReturnType<typeof openStore>>;
beforeAll(async () => {
  store = await openStore('sqlite::memory:');
});
afterAll(() => store.close());

const call = { step: 'create_refund', key: 'op:create_refund', operationId: 'op', boundary: 'stripe' as const };
const never = (): Classified => {
  throw new Error('the classifier should not be asked');
};
const failing = (c: Classified) => async () => {
  throw c;
};

it('spreads a backoff by the rule’s jitter, through nextRetryDelay', async () => {
  const at = (random: number) =>
    createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations, random: () => random });
  const transient = new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'provider_error', '502');
  const { run } = activityEnv({ attempt: 2 });
  const low = await failureOf(run(() => at(0)(call, never, failing(transient))));
  const high = await failureOf(run(() => at(0.99999)(call, never, failing(transient))));
  // attempt 2 → 2000 ms, ± 20 %.
  expect([low.nextRetryDelay, high.nextRetryDelay]).toEqual([1600, 2400]);
  expect(low).toMatchObject({ type: 'TRANSIENT_DEPENDENCY', nonRetryable: false });
});

it('never waits less than Retry-After, and stops with BUDGET_EXCEEDED when the wait does not fit', async () => {
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations, random: () => 0 });
  const limited = new Classified('RATE_LIMIT', 'not_executed', 'rate_limited', '429', { retryAfterMs: 5000 });
  const roomy = await failureOf(activityEnv().run(() => runner(call, never, failing(limited))));
  expect(roomy.nextRetryDelay).toBe(5000);
  const tight = activityEnv({ scheduledTimestampMs: Date.now(), scheduleToCloseTimeoutMs: 4000 });
  const out = await failureOf(tight.run(() => runner(call, never, failing(limited))));
  expect(out).toMatchObject({ type: 'BUDGET_EXCEEDED', nonRetryable: true });
  expect(detailsOf(out)).toMatchObject({
    certainty: 'not_executed',
    reason: 'rate_limit_retry_exceeds_budget',
    retryAfterMs: 5000,
  });
});

it('does not retry what the policy does not retry, nor past the rule’s attempts', async () => {
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const unknown = new Classified('UNKNOWN_OUTCOME', 'may_have_executed', 'response_lost', 'reset');
  await expect(failureOf(activityEnv().run(() => runner(call, never, failing(unknown))))).resolves.toMatchObject({
    nonRetryable: true,
    nextRetryDelay: undefined,
  });
  const transient = new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'provider_error', '502');
  await expect(
    failureOf(activityEnv({ attempt: 5 }).run(() => runner(call, never, failing(transient)))),
  ).resolves.toMatchObject({ nonRetryable: true });
});

it('classifies what the activity did not, and keeps the cause', async () => {
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const failure = await failureOf(
    activityEnv().run(() =>
      runner(
        call,
        (err) =>
          new Classified('POISON', 'undeterminable', 'unclassified_error', (err as Error).message, { cause: err }),
        async () => {
          throw new TypeError('cannot read properties of undefined (customer@example.test)');
        },
      ),
    ),
  );
  expect(failure).toMatchObject({ type: 'POISON', nonRetryable: true });
  expect(failure.message).toBe('cannot read properties of undefined (c***@example.test)');
  expect(failure.cause).toMatchObject({ name: 'TypeError' });
  expect(failure.cause?.message).toMatch(/c\*\*\*@example\.test/);
});

it('returns the result with the step’s ledger for this run', async () => {
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const key = { ...call, key: 'op2:create_refund' };
  const env = activityEnv({ attempt: 1, workflowExecution: { workflowId: 'wf', runId: 'run-a' } });
  await failureOf(
    env.run(() => runner(key, never, failing(new Classified('RATE_LIMIT', 'not_executed', 'rate_limited', '429')))),
  );
  const ok = await activityEnv({ attempt: 2, workflowExecution: { workflowId: 'wf', runId: 'run-a' } }).run(() =>
    runner(key, never, async () => ({ done: true })),
  );
  expect(ok).toMatchObject({
    done: true,
    evidence: {
      attempt: 2,
      ledger: [
        expect.objectContaining({ attempt: 1, outcome: 'RATE_LIMIT' }),
        expect.objectContaining({ attempt: 2, outcome: 'ok' }),
      ],
    },
  });
});

it("lends each attempt one of the worker's Stripe clients, given back once its body has settled, failed or not", async () => {
  const worker = createStripeClient({ secretKey: 'sk_test_1', apiBase: 'http://127.0.0.1:1' });
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const lent: Stripe[] = [];
  const borrowing = (then: () => Promise<object>) => async (a: Attempt) => {
    lent.push(stripeIn(worker, a));
    return then();
  };
  const transient = new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'provider_error', '502');
  // A client given back is lent again from the next turn of the event loop.
  const nextTurn = () => new Promise((r) => setImmediate(r));
  await activityEnv().run(() =>
    runner(
      call,
      never,
      borrowing(async () => ({})),
    ),
  );
  await nextTurn();
  await failureOf(activityEnv().run(() => runner(call, never, borrowing(failing(transient)))));
  await nextTurn();
  await activityEnv().run(() =>
    runner(
      call,
      never,
      borrowing(async () => ({})),
    ),
  );
  expect(lent[0]).not.toBe(worker);
  expect(new Set(lent).size).toBe(1);
});

it('knows a first attempt’s ledger without reading it back, and it is what a read returns', async () => {
  const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: store.operations });
  const key = { ...call, key: 'op3:create_refund' };
  const run = { workflowId: 'wf', runId: 'run-b' };
  const reads = jest.spyOn(store.operations, 'attempts');
  try {
    const ok = await activityEnv({ attempt: 1, workflowExecution: run }).run(() =>
      runner(key, never, async () => ({ done: true })),
    );
    expect(reads).not.toHaveBeenCalled();
    const stored = await store.operations.attempts(key.key, run.runId);
    // Every field of the summary (AttemptSummary's ten), as the stored row has it.
    const fields = [
      'attempt',
      'startedAt',
      'finishedAt',
      'outcome',
      'certainty',
      'reason',
      'transportRequests',
      'retryAfterMs',
      'nextDelayMs',
      'providerRequestId',
    ];
    expect(ok.evidence.ledger).toEqual(
      stored.map((row) => Object.fromEntries(fields.map((f) => [f, row[f as keyof typeof row]]))),
    );
    // A later activity of the same step in the run (resubmitted with attempt 1 again) reads the ledger: it has two rows.
    const failed = await failureOf(
      activityEnv({ attempt: 1, workflowExecution: run }).run(() =>
        runner(key, never, failing(new Classified('RATE_LIMIT', 'not_executed', 'rate_limited', '429'))),
      ),
    );
    expect(reads).toHaveBeenCalledTimes(2);
    expect(detailsOf(failed).ledger).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'ok' }),
      expect.objectContaining({ attempt: 1, outcome: 'RATE_LIMIT' }),
    ]);
  } finally {
    reads.mockRestore();
  }
});

describe('the ledger row and the provider requests', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attempt-ledger-'));
  const file = path.join(dir, 'orders.db');
  let onDisk: Database.Database;
  let counted: Awaited<ReturnType<typeof openStore>>;
  let commits = 0;
  let provider: http.Server;
  let port: number;
  /** The attempt rows another process would read as each request arrived. */
  const seen: unknown[][] = [];

  beforeAll(async () => {
    counted = await openStore(`sqlite:${file}`, { observer: { statement: () => undefined, commit: () => commits++ } });
    await counted.seedOrder({
      id: 'led-1',
      paymentIntentId: 'pi_led',
      customerEmail: 'a@example.test',
      currency: 'usd',
      amount: 1000,
    });
    onDisk = new Database(file, { readonly: true });
    provider = http.createServer((req, res) => {
      seen.push(onDisk.prepare('SELECT key, attempt, finished_at FROM attempts ORDER BY id').all());
      req.resume().once('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    port = (provider.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => provider.close(resolve));
    onDisk.close();
    await counted.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const post = async (a: Attempt) =>
    (
      await new StripeTransport(a).makeRequest('127.0.0.1', String(port), '/v1/refunds', 'POST', {}, '', 'http', 5000)
    ).toJSON();
  const get = async (a: Attempt) =>
    (
      await new StripeTransport(a).makeRequest('127.0.0.1', String(port), '/v1/refunds', 'GET', {}, '', 'http', 5000)
    ).toJSON();

  it('is on disk before a request goes out: committed alone when no transaction carried it, once for requests made together', async () => {
    const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: counted.operations });
    seen.length = 0;
    commits = 0;
    const ok = await activityEnv({ attempt: 1, workflowExecution: { workflowId: 'wf', runId: 'run-d' } }).run(() =>
      runner({ ...call, key: 'led:reads' }, never, async (a) => {
        await Promise.all([get(a), get(a)]);
        return { read: true };
      }),
    );
    expect(seen).toEqual([
      [{ key: 'led:reads', attempt: 1, finished_at: null }],
      [{ key: 'led:reads', attempt: 1, finished_at: null }],
    ]);
    // Its beginning alone, then its end.
    expect(commits).toBe(2);
    expect(ok.evidence.ledger).toEqual([expect.objectContaining({ outcome: 'ok', transportRequests: 2 })]);
  });

  it('rides in the step’s own transactions: the first carries the row, the one recording the effect its end', async () => {
    const runner = createAttemptRunner({ policy: DEFAULT_POLICY, log: counted.operations });
    const key = { ...call, key: 'led:create', operationId: 'led-1:v1' };
    seen.length = 0;
    commits = 0;
    const ok = await activityEnv({ attempt: 1, workflowExecution: { workflowId: 'wf', runId: 'run-e' } }).run(() =>
      runner(key, never, async (a) => {
        await counted.operations.commitIntent({
          operationId: 'led-1:v1',
          orderId: 'led-1',
          operationVersion: 1,
          scope: 'test',
          requestHash: 'h',
          request: { orderId: 'led-1', amount: 100, currency: 'usd', reason: 'requested_by_customer' },
          actor: 'wf',
        });
        await post(a);
        await recordingEffect(a, () =>
          counted.operations.settle('led-1:v1', { status: 'unknown', reason: 'probe' }, 'wf', 'probe'),
        );
        return { made: true };
      }),
    );
    expect(seen).toEqual([expect.arrayContaining([{ key: 'led:create', attempt: 1, finished_at: null }])]);
    // The step's two transactions, nothing else.
    expect(commits).toBe(2);
    const [row] = await counted.operations.attempts('led:create', 'run-e');
    expect(row).toMatchObject({ outcome: 'ok', transportRequests: 1, finishedAt: ok.evidence.ledger[0]!.finishedAt });

    // Failing after its effect was recorded, the attempt's end says so.
    const failed = await failureOf(
      activityEnv({ attempt: 1, workflowExecution: { workflowId: 'wf', runId: 'run-f' } }).run(() =>
        runner(key, never, async (a) => {
          await recordingEffect(a, () =>
            counted.operations.settle('led-1:v1', { status: 'unknown', reason: 'probe' }, 'wf', 'probe'),
          );
          throw new Classified('STATE_CONFLICT', 'completed', 'after_effect', 'failed after its effect');
        }),
      ),
    );
    expect(detailsOf(failed).ledger).toEqual([expect.objectContaining({ outcome: 'STATE_CONFLICT' })]);
    expect(await counted.operations.attempts('led:create', 'run-f')).toMatchObject([{ outcome: 'STATE_CONFLICT' }]);
  });
});
