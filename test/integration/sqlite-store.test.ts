import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  IntentConflictError,
  InvalidOperationError,
  OrderNotFoundError,
  RefundExceedsOrderError,
  LaterVersionError,
  OperationInFlightError,
  SqliteOrderStore,
  VersionConflictError,
  openStore,
  type NewOrder,
  type NewOutboxEntry,
  type OrderStore,
} from '../../src/store';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sqlite-store-'));
const file = path.join(dir, 'orders.db');
const opened: OrderStore[] = [];

function open(options?: ConstructorParameters<typeof SqliteOrderStore>[1]): SqliteOrderStore {
  const store = new SqliteOrderStore(file, options);
  opened.push(store);
  return store;
}

function order(id: string, amount = 1000): NewOrder {
  return { id, paymentIntentId: `pi_${id}`, customerEmail: `${id}@example.test`, currency: 'usd', amount };
}

let store: SqliteOrderStore;

beforeAll(() => {
  store = open();
});

afterAll(async () => {
  for (const s of opened) await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('seedOrder', () => {
  it('inserts once and returns the same order for an identical seed', async () => {
    const first = await store.seedOrder(order('seed-1'));
    expect(first).toEqual({ ...order('seed-1'), refundedAmount: 0, status: 'paid', version: 1 });
    await expect(store.seedOrder(order('seed-1'))).resolves.toEqual(first);
  });

  it('refuses a seed with different fields and leaves the stored order alone', async () => {
    await store.seedOrder(order('seed-2', 1000));
    await expect(store.seedOrder(order('seed-2', 2000))).rejects.toThrow(IntentConflictError);
    await expect(store.seedOrder(order('seed-2', 2000))).rejects.toThrow(/amount: stored 1000, got 2000/);
    expect((await store.getOrder('seed-2'))?.amount).toBe(1000);
  });

  it('uses WAL mode on a file', () => {
    const db = new Database(file, { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
  });
});

describe('applyRefund', () => {
  it('is idempotent by operation id', async () => {
    await store.seedOrder(order('apply-1'));
    const input = { orderId: 'apply-1', operationId: 'op-a1', refundId: 're_1', amount: 400 };
    const first = await store.applyRefund(input);
    expect(first).toEqual({ orderId: 'apply-1', status: 'partially_refunded', refundedAmount: 400, version: 2, changed: true });
    await expect(store.applyRefund(input)).resolves.toEqual({ ...first, changed: false });
  });

  it('refuses the same operation id with different parameters', async () => {
    await expect(store.applyRefund({ orderId: 'apply-1', operationId: 'op-a1', refundId: 're_1', amount: 401 })).rejects.toThrow(IntentConflictError);
  });

  it('accumulates different operations and moves paid → partially_refunded → refunded', async () => {
    await store.seedOrder(order('apply-2'));
    const a = await store.applyRefund({ orderId: 'apply-2', operationId: 'op-b1', refundId: 're_b1', amount: 300 });
    const b = await store.applyRefund({ orderId: 'apply-2', operationId: 'op-b2', refundId: 're_b2', amount: 700 });
    expect([a.status, a.refundedAmount, a.version]).toEqual(['partially_refunded', 300, 2]);
    expect([b.status, b.refundedAmount, b.version]).toEqual(['refunded', 1000, 3]);
  });

  it('rejects an over-refund and changes nothing', async () => {
    await store.seedOrder(order('apply-3'));
    await store.applyRefund({ orderId: 'apply-3', operationId: 'op-c1', refundId: 're_c1', amount: 600 });
    const before = await store.getOrder('apply-3');
    const over = { orderId: 'apply-3', operationId: 'op-c2', refundId: 're_c2', amount: 401 };
    await expect(store.applyRefund(over)).rejects.toThrow(RefundExceedsOrderError);
    await expect(store.applyRefund(over)).rejects.toThrow(/exceeds what is left to refund \(400 of 1000\)/);
    expect(await store.getOrder('apply-3')).toEqual(before);
    // Nothing was recorded for the refused operation, so reverting it is refused too.
    await expect(store.revertRefund({ orderId: 'apply-3', operationId: 'op-c2', compensationKey: 'comp-c2' })).rejects.toThrow(InvalidOperationError);
  });

  it('rejects an unknown order and a non-positive amount', async () => {
    await expect(store.applyRefund({ orderId: 'nope', operationId: 'op-n', refundId: 're_n', amount: 1 })).rejects.toThrow(OrderNotFoundError);
    await expect(store.applyRefund({ orderId: 'apply-3', operationId: 'op-z', refundId: 're_z', amount: 0 })).rejects.toThrow(InvalidOperationError);
  });
});

describe('optimistic concurrency', () => {
  it('throws VersionConflictError when another connection commits between the read and the write', async () => {
    await store.seedOrder(order('race-1'));
    const other = open();
    const pending: Promise<unknown>[] = [];
    const racing = open({
      beforeOrderWrite: () => {
        // Runs synchronously up to its first await, so the other store commits inside our transaction.
        if (pending.length === 0) pending.push(other.applyRefund({ orderId: 'race-1', operationId: 'op-r-other', refundId: 're_o', amount: 100 }));
      },
    });
    const attempt = racing.applyRefund({ orderId: 'race-1', operationId: 'op-r-mine', refundId: 're_m', amount: 200 });
    // SQLite refuses to upgrade a stale read snapshot (SQLITE_BUSY_SNAPSHOT); the store reports it as a version conflict.
    await expect(attempt).rejects.toThrow(VersionConflictError);
    await expect(attempt).rejects.toThrow(/another writer changed the order/);
    await expect(Promise.all(pending)).resolves.toEqual([expect.objectContaining({ changed: true, version: 2 })]);
    expect((await store.getOrder('race-1'))?.refundedAmount).toBe(100);

    // The retry reads the canonical state and succeeds on top of the other write.
    await expect(racing.applyRefund({ orderId: 'race-1', operationId: 'op-r-mine', refundId: 're_m', amount: 200 })).resolves.toMatchObject({
      refundedAmount: 300,
      version: 3,
      changed: true,
    });
  });

  it('throws VersionConflictError when the conditional update matches no row', async () => {
    await store.seedOrder(order('race-2'));
    let racing: SqliteOrderStore | undefined = undefined;
    let interfered = false;
    const pending: Promise<unknown>[] = [];
    racing = open({
      beforeOrderWrite: () => {
        if (interfered || !racing) return;
        interfered = true;
        // A write on the same connection (a savepoint inside our transaction) bumps the version under us.
        pending.push(racing.applyRefund({ orderId: 'race-2', operationId: 'op-s-other', refundId: 're_o', amount: 100 }));
      },
    });
    await expect(racing.applyRefund({ orderId: 'race-2', operationId: 'op-s-mine', refundId: 're_m', amount: 200 })).rejects.toThrow(
      /changed after it was read at version 1/,
    );
    await Promise.allSettled(pending);
    // Both writes were in the rolled-back transaction.
    expect(await store.getOrder('race-2')).toMatchObject({ refundedAmount: 0, version: 1 });
  });
});

describe('revertRefund', () => {
  it('restores the prior state and is idempotent by compensation key', async () => {
    await store.seedOrder(order('revert-1'));
    await store.applyRefund({ orderId: 'revert-1', operationId: 'op-d1', refundId: 're_d1', amount: 1000 });
    const revert = { orderId: 'revert-1', operationId: 'op-d1', compensationKey: 'op-d1:compensate' };
    const first = await store.revertRefund(revert);
    expect(first).toEqual({ orderId: 'revert-1', status: 'paid', refundedAmount: 0, version: 3, changed: true });
    await expect(store.revertRefund(revert)).resolves.toEqual({ ...first, changed: false });
    // Re-applying the reverted operation is not a new refund.
    await expect(store.applyRefund({ orderId: 'revert-1', operationId: 'op-d1', refundId: 're_d1', amount: 1000 })).resolves.toMatchObject({
      refundedAmount: 0,
      changed: false,
    });
  });

  it('subtracts only its own amount when a later refund was applied after it', async () => {
    await store.seedOrder(order('revert-2'));
    await store.applyRefund({ orderId: 'revert-2', operationId: 'op-e1', refundId: 're_e1', amount: 300 });
    await store.applyRefund({ orderId: 'revert-2', operationId: 'op-e2', refundId: 're_e2', amount: 200 });
    await expect(store.revertRefund({ orderId: 'revert-2', operationId: 'op-e1', compensationKey: 'comp-e1' })).resolves.toEqual({
      orderId: 'revert-2',
      status: 'partially_refunded',
      refundedAmount: 200,
      version: 4,
      changed: true,
    });
    await expect(store.revertRefund({ orderId: 'revert-2', operationId: 'op-e2', compensationKey: 'comp-e2' })).resolves.toMatchObject({
      status: 'paid',
      refundedAmount: 0,
    });
  });

  it('refuses an operation never applied and a compensation key reused for another operation', async () => {
    await expect(store.revertRefund({ orderId: 'revert-2', operationId: 'op-never', compensationKey: 'comp-x' })).rejects.toThrow(/was never applied/);
    await store.applyRefund({ orderId: 'revert-1', operationId: 'op-d2', refundId: 're_d2', amount: 10 });
    await expect(store.revertRefund({ orderId: 'revert-1', operationId: 'op-d2', compensationKey: 'op-d1:compensate' })).rejects.toThrow(IntentConflictError);
  });
});

describe('notification outbox', () => {
  const entry: NewOutboxEntry = {
    key: 'refund-o1-v1:notify:v1',
    orderId: 'o1',
    kind: 'refund_notice',
    recipient: 'o1@example.test',
    subject: 'Your refund',
    messageId: '<refund-o1-v1.notify.v1@durable-refunds.local>',
  };

  it('claims once, counts attempts and records the send', async () => {
    const first = await store.claimNotification(entry);
    expect(first).toMatchObject({ ...entry, status: 'pending', attempts: 1, providerResponse: null, sentAt: null });
    expect((await store.claimNotification(entry)).attempts).toBe(2);
    const sent = await store.markNotificationSent(entry.key, '250 OK: stored as message 1');
    expect(sent).toMatchObject({ status: 'sent', providerResponse: '250 OK: stored as message 1', attempts: 2 });
    expect(sent.sentAt).not.toBeNull();
    // The first acceptance is kept.
    await expect(store.markNotificationSent(entry.key, '250 again')).resolves.toEqual(sent);
    await expect(store.claimNotification(entry)).resolves.toMatchObject({ status: 'sent', attempts: 3 });
    await expect(store.getNotification(entry.key)).resolves.toMatchObject({ status: 'sent', attempts: 3 });
    await expect(store.getNotification('missing')).resolves.toBeUndefined();
  });

  it('refuses a changed intent under the same key', async () => {
    await expect(store.claimNotification({ ...entry, recipient: 'someone-else@example.test' })).rejects.toThrow(IntentConflictError);
    await expect(store.claimNotification({ ...entry, subject: 'Other' })).rejects.toThrow(/subject/);
    await expect(store.claimNotification({ ...entry, messageId: '<other@x>' })).rejects.toThrow(/messageId/);
    await expect(store.markNotificationSent('missing', '250')).rejects.toThrow(/no notification/);
    await expect(store.markNotificationSending('missing')).rejects.toThrow(/no notification/);
    await expect(store.releaseNotification('missing')).rejects.toThrow(/no notification/);
  });

  it('lets exactly one caller move pending → sending, and back to pending only from sending', async () => {
    const key = 'refund-o2-v1:notify:v1';
    await store.claimNotification({ ...entry, key, messageId: '<refund-o2-v1.notify.v1@durable-refunds.local>' });
    await expect(store.releaseNotification(key)).resolves.toBe(false);

    // A second connection to the same file stands in for a second worker.
    const other = open();
    await expect(Promise.all([store.markNotificationSending(key), other.markNotificationSending(key)])).resolves.toEqual([true, false]);
    await expect(other.markNotificationSending(key)).resolves.toBe(false);
    await expect(other.getNotification(key)).resolves.toMatchObject({ status: 'sending' });

    await expect(other.releaseNotification(key)).resolves.toBe(true);
    await expect(store.releaseNotification(key)).resolves.toBe(false);
    await expect(store.getNotification(key)).resolves.toMatchObject({ status: 'pending', sentAt: null });

    await expect(other.markNotificationSending(key)).resolves.toBe(true);
    const sent = await store.markNotificationSent(key, '250 OK: stored as message 7');
    expect(sent).toMatchObject({ status: 'sent', providerResponse: '250 OK: stored as message 7' });
    await expect(store.markNotificationSending(key)).resolves.toBe(false);
    await expect(store.releaseNotification(key)).resolves.toBe(false);
    await expect(other.getNotification(key)).resolves.toEqual(sent);
  });

  it('keeps a sending entry sending across close and reopen', async () => {
    const key = 'refund-o3-v1:notify:v1';
    const first = new SqliteOrderStore(file);
    await first.claimNotification({ ...entry, key, messageId: '<refund-o3-v1.notify.v1@durable-refunds.local>' });
    await expect(first.markNotificationSending(key)).resolves.toBe(true);
    await first.close();

    const second = open();
    await expect(second.getNotification(key)).resolves.toMatchObject({ status: 'sending', attempts: 1 });
    await expect(second.claimNotification({ ...entry, key, messageId: '<refund-o3-v1.notify.v1@durable-refunds.local>' })).resolves.toMatchObject({
      status: 'sending',
      attempts: 2,
    });
    await expect(second.markNotificationSending(key)).resolves.toBe(false);
  });
});

describe('persistence and openStore', () => {
  it('keeps state across close and reopen', async () => {
    const url = `sqlite:${path.join(dir, 'nested', 'persist.db')}`;
    const first = openStore(url);
    await first.seedOrder(order('persist-1'));
    await first.applyRefund({ orderId: 'persist-1', operationId: 'op-p1', refundId: 're_p1', amount: 250 });
    await first.close();
    await first.close();

    const second = openStore(url);
    opened.push(second);
    await expect(second.getOrder('persist-1')).resolves.toMatchObject({ refundedAmount: 250, status: 'partially_refunded', version: 2 });
    await expect(second.applyRefund({ orderId: 'persist-1', operationId: 'op-p1', refundId: 're_p1', amount: 250 })).resolves.toMatchObject({ changed: false });
  });

  it('opens relative and in-memory SQLite URLs', async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const relative = openStore('sqlite:rel/orders.db');
      await relative.close();
      expect(fs.existsSync(path.join(dir, 'rel', 'orders.db'))).toBe(true);
    } finally {
      process.chdir(cwd);
    }
    const memory = openStore('sqlite::memory:');
    await expect(memory.seedOrder(order('mem-1'))).resolves.toMatchObject({ id: 'mem-1' });
    await memory.close();
  });

  it('names what is accepted when the URL is not usable', () => {
    expect(() => openStore('postgres://user:secret@db/orders')).toThrow(/PostgreSQL is not supported yet/);
    expect(() => openStore('postgresql://user:secret@db/orders')).toThrow(/postgresql:\/\/\*\*\*@db\/orders/);
    expect(() => openStore('mysql://db/orders')).toThrow(/expected "sqlite:\/absolute\/path.db"/);
    expect(() => openStore('sqlite:')).toThrow(/names no usable SQLite file/);
    expect(() => openStore('sqlite://host/orders.db')).toThrow(/names no usable SQLite file/);
  });
});

describe('operation log', () => {
  const intent = (operationId: string, amount = 500, requestHash = `h-${amount}`) => ({
    operationId,
    orderId: 'ops-1',
    operationVersion: Number(operationId.slice(-1)),
    scope: 'test',
    requestHash,
    request: { orderId: 'ops-1', amount, currency: 'usd', reason: 'requested_by_customer' },
    actor: 'wf-1',
  });

  it('commits an intent once, returns it again for the same request, and refuses a changed one without writing', async () => {
    const first = await store.operations.commitIntent(intent('op:v1'));
    expect(first).toMatchObject({ created: true, record: { status: 'intent', requestHash: 'h-500', requestsSent: 0, firstSentAt: null, createdBy: 'wf-1' } });
    await expect(store.operations.commitIntent({ ...intent('op:v1'), actor: 'wf-2' })).resolves.toMatchObject({ created: false, record: { createdBy: 'wf-1' } });
    await expect(store.operations.commitIntent(intent('op:v1', 700))).rejects.toThrow(IntentConflictError);
    await expect(store.operations.commitIntent(intent('op:v1', 700))).rejects.toThrow(/first requested as 500 usd .* needs a new operation version/);
    await expect(store.operations.get('op:v1')).resolves.toMatchObject({ requestHash: 'h-500', request: { amount: 500 } });
  });

  it('stamps each send and settles with an audit entry in the same transaction', async () => {
    await store.operations.commitIntent(intent('op:v2'));
    const sent = await store.operations.markSent('op:v2', 'wf-1');
    const again = await store.operations.markSent('op:v2', 'wf-1');
    expect(again).toMatchObject({ requestsSent: 2, firstSentAt: sent.firstSentAt });
    expect(again.lastSentAt! >= sent.lastSentAt!).toBe(true);
    const receipt = { refundId: 're_1', paymentIntentId: 'pi_1', amount: 500, currency: 'usd', status: 'succeeded', created: 1, operationId: 'op:v2', replayed: false };
    await store.operations.settle('op:v2', { status: 'unknown', reason: 'response_lost' }, 'wf-1', 'refund_outcome_unknown');
    await expect(store.operations.settle('op:v2', { status: 'refunded', refund: receipt }, 'wf-1', 'reconciled', { result: 'completed' })).resolves.toMatchObject({
      applied: true,
      record: { status: 'refunded', refund: receipt },
    });
    await store.operations.settle('op:v2', { status: 'completed' }, 'wf-1', 'completion_gate_passed');
    // A late writer never moves it backwards: a timed-out attempt's "unknown", a stale absence proof.
    await expect(store.operations.settle('op:v2', { status: 'unknown' }, 'wf-2', 'refund_outcome_unknown')).resolves.toMatchObject({ applied: false, record: { status: 'completed' } });
    await expect(store.operations.settle('op:v2', { status: 'intent', absenceConfirmedAt: 'x' }, 'wf-2', 'reconciled')).resolves.toMatchObject({ applied: false, record: { absenceConfirmedAt: null } });
    const trail = await store.operations.auditTrail('op:v2');
    expect(trail.map((e) => e.event)).toEqual([
      'intent_committed', 'refund_request_sent', 'refund_request_sent', 'refund_outcome_unknown', 'reconciled', 'completion_gate_passed', 'refund_outcome_unknown', 'reconciled',
    ]);
    expect(trail[4].detail).toEqual({ status: 'refunded', result: 'completed' });
    expect(trail[6].detail).toEqual({ status: 'unknown', ignored: 'status stays completed' });
    await expect(store.operations.markSent('op:nobody', 'x')).rejects.toThrow(/commit its intent first/);
    expect((await store.operations.forOrder('ops-1')).map((o) => o.operationId)).toEqual(['op:v1', 'op:v2']);
  });

  it('proves absence only if nothing was sent since the lookup', async () => {
    await store.operations.commitIntent(intent('op:v3'));
    const seen = (await store.operations.markSent('op:v3', 'wf-3')).requestsSent;
    await store.operations.settle('op:v3', { status: 'unknown' }, 'wf-3', 'refund_outcome_unknown');
    await store.operations.settle('op:v3', { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: seen }, 'wf-4', 'reconciled');
    await expect(store.operations.get('op:v3')).resolves.toMatchObject({ status: 'intent', requestsSent: 1, provenAbsentThrough: 1 });
    await store.operations.markSent('op:v3', 'wf-3');
    // A proof taken before that send covers it no longer, and none can be set on its strength.
    await expect(store.operations.get('op:v3')).resolves.toMatchObject({ requestsSent: 2, provenAbsentThrough: 1 });
    const stale = await store.operations.settle('op:v3', { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: seen }, 'wf-4', 'reconciled');
    expect(stale).toMatchObject({ applied: false, record: { provenAbsentThrough: 1 } });
  });

  it('lets only the highest version of an order send, and only while no other has a send not proven absent', async () => {
    const on = (id: string, version: number) => ({ ...intent(id), orderId: 'ops-2', operationVersion: version, request: { ...intent(id).request, orderId: 'ops-2' } });
    await store.operations.commitIntent(on('o2:v1', 1));
    await store.operations.markSent('o2:v1', 'wf-1');
    await store.operations.commitIntent(on('o2:v2', 2));
    // v1's send is out: v2 waits for it.
    await expect(store.operations.markSent('o2:v2', 'wf-2')).rejects.toThrow(OperationInFlightError);
    // v2 exists: v1 never sends again, and no new operation may come in below v2.
    await expect(store.operations.markSent('o2:v1', 'wf-1')).rejects.toThrow(LaterVersionError);
    await expect(store.operations.commitIntent(on('o2:v0', 0))).rejects.toThrow(/already has operation o2:v2; a new operation needs a version above it/);
    await store.operations.settle('o2:v1', { status: 'refunded' }, 'wf-1', 'refund_confirmed');
    await expect(store.operations.markSent('o2:v2', 'wf-2')).resolves.toMatchObject({ requestsSent: 1 });

    // A refused operation sent after all counts as in flight until it is settled.
    await store.operations.settle('o2:v2', { status: 'rejected', reason: 'no' }, 'wf-2', 'rejected');
    await store.operations.commitIntent(on('o2:v3', 3));
    await expect(store.operations.markSent('o2:v3', 'wf-3')).rejects.toThrow(OperationInFlightError);
    await store.operations.settle('o2:v2', { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: 1 }, 'wf-3', 'reconciled');
    await expect(store.operations.markSent('o2:v3', 'wf-3')).resolves.toMatchObject({ requestsSent: 1 });
  });

  it('keeps each attempt of a step per run, including one that never finished', async () => {
    const a = await store.operations.beginAttempt({ key: 'k', step: 'create_refund', operationId: 'op:v2', workflowId: 'wf', runId: 'r1', attempt: 1 });
    await store.operations.finishAttempt(a, { transportRequests: 1, outcome: 'RATE_LIMIT', certainty: 'not_executed', reason: 'rate_limited', retryAfterMs: 1000, nextDelayMs: 1100, providerRequestId: 'req_1' });
    await store.operations.beginAttempt({ key: 'k', step: 'create_refund', operationId: 'op:v2', workflowId: 'wf', runId: 'r1', attempt: 2 });
    await store.operations.beginAttempt({ key: 'k', step: 'create_refund', operationId: 'op:v2', workflowId: 'wf', runId: 'r2', attempt: 1 });
    const ledger = await store.operations.attempts('k', 'r1');
    expect(ledger.map((r) => [r.attempt, r.outcome, r.transportRequests, r.finishedAt === null])).toEqual([
      [1, 'RATE_LIMIT', 1, false],
      [2, null, 0, true],
    ]);
    expect(ledger[0]).toMatchObject({ retryAfterMs: 1000, nextDelayMs: 1100, providerRequestId: 'req_1' });
  });

  it('takes store faults only from a store opened with faults on, and refuses a nonsense count', async () => {
    await expect(store.faults.add({ kind: 'conflict', count: 0 })).rejects.toThrow(/count must be 1-1000/);
    const fault = await store.faults.add({ kind: 'conflict', orderId: 'apply-1' });
    expect(fault).toMatchObject({ kind: 'conflict', orderId: 'apply-1', remaining: 1, hits: 0 });
    await store.faults.clear();
    await expect(store.faults.list()).resolves.toEqual([]);
    expect(() => new SqliteOrderStore(':memory:', { faults: true })).toThrow(/need a database file/);
  });
});
