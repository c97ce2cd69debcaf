// The order store's suite, run against SQLite and PostgreSQL alike: each database gets the same
// tests, each test file a fresh database (PostgreSQL's from the server test/global-setup.ts starts).
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import {
  IntentConflictError,
  InvalidOperationError,
  OrderNotFoundError,
  RefundExceedsOrderError,
  LaterVersionError,
  OperationInFlightError,
  VersionConflictError,
  openStore,
  type NewOrder,
  type NewOutboxEntry,
  type OpenStoreOptions,
  type OrderStore,
} from '../../src/store';
import { openPostgres, openSqlite } from '../../src/store/database';
import { OperationLog } from '../../src/store/operation-log';
import { DIALECTS, freshDatabase } from '../helpers/databases';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'order-store-'));

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** How an attempt that succeeded without a provider request ends, in the ledger. */
const OK_END = {
  transportRequests: 0,
  outcome: 'ok',
  certainty: 'completed',
  reason: null,
  retryAfterMs: null,
  nextDelayMs: null,
  providerRequestId: null,
};

function order(id: string, amount = 1000): NewOrder {
  return { id, paymentIntentId: `pi_${id}`, customerEmail: `${id}@example.test`, currency: 'usd', amount };
}

it('writes an attempt’s row once when the transaction that carried it failed at COMMIT (SQLite: a deferred key)', async () => {
  const file = path.join(dir, 'commit-fails.db');
  const store = await openStore(`sqlite:${file}`);
  const db = openSqlite(file);
  try {
    const log = new OperationLog(db);
    const row = log.openAttempt({
      key: 'cf',
      step: 'update_order',
      operationId: 'o:v1',
      workflowId: 'wf',
      runId: 'r',
      attempt: 1,
    });
    await row.run(() =>
      expect(
        db.transaction(async (tx) => {
          await tx.run(sql`PRAGMA defer_foreign_keys = ON`);
          await tx.run(sql`
            INSERT INTO order_refunds (operation_id, order_id, refund_id, amount, prior_refunded_amount, prior_status, applied_version, applied_at)
            VALUES ('o:v1', 'no-such-order', 're_x', 1, 0, 'paid', 1, 'now')`);
        }),
      ).rejects.toThrow(/FOREIGN KEY/),
    );
    // The row rode in that transaction and was rolled back with it: the next write looks, finds none, writes one.
    await expect(row.begun()).resolves.toMatchObject({ startedAt: row.startedAt });
    await row.finish(OK_END);
    expect(await log.attempts('cf', 'r')).toMatchObject([{ outcome: 'ok' }]);
  } finally {
    await db.close();
    await store.close();
  }
});

describe.each(DIALECTS)('on %s', (dialect) => {
  const opened: OrderStore[] = [];
  let url: string;
  let store: OrderStore;

  async function open(options?: OpenStoreOptions): Promise<OrderStore> {
    const s = await openStore(url, options);
    opened.push(s);
    return s;
  }

  beforeAll(async () => {
    url = await freshDatabase(dialect, dir);
    store = await open();
  });

  afterAll(async () => {
    for (const s of opened) await s.close();
  });

  it('counts what it sends: every statement by kind, BEGIN and COMMIT too, and each commit', async () => {
    const statements: string[] = [];
    let commits = 0;
    const counted = await open({ observer: { statement: (kind) => statements.push(kind), commit: () => commits++ } });
    const migrating = statements.length;
    statements.length = 0;
    commits = 0;
    await counted.seedOrder(order('counted-1'));
    expect(statements[0]).toBe('begin');
    expect(statements.at(-1)).toBe('commit');
    expect(statements).toContain('insert');
    expect(commits).toBe(statements.filter((k) => k === 'commit').length);
    const afterSeed = statements.length;
    await counted.getOrder('counted-1');
    expect(statements.slice(afterSeed).every((k) => k === 'select' || k === 'begin' || k === 'commit')).toBe(true);
    expect(statements.length).toBeGreaterThan(afterSeed);
    // A write outside a transaction is a commit of its own, an INSERT … RETURNING too.
    const before = commits;
    const row = counted.operations.openAttempt({
      key: 'counted-1:k',
      step: 'load_order',
      operationId: 'counted-1:v1',
      workflowId: 'wf',
      runId: 'r',
      attempt: 1,
    });
    await row.begun();
    await row.finish(OK_END);
    expect(commits - before).toBe(2);
    // Opening counted too: the migrator's check of the schema.
    expect(migrating).toBeGreaterThan(0);
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
  });

  describe('applyRefund', () => {
    it('is idempotent by operation id', async () => {
      await store.seedOrder(order('apply-1'));
      const input = { orderId: 'apply-1', operationId: 'op-a1', refundId: 're_1', amount: 400 };
      const first = await store.applyRefund(input);
      expect(first).toEqual({
        orderId: 'apply-1',
        status: 'partially_refunded',
        refundedAmount: 400,
        version: 2,
        changed: true,
      });
      await expect(store.applyRefund(input)).resolves.toEqual({ ...first, changed: false });
    });

    it('refuses the same operation id with different parameters', async () => {
      await expect(
        store.applyRefund({ orderId: 'apply-1', operationId: 'op-a1', refundId: 're_1', amount: 401 }),
      ).rejects.toThrow(IntentConflictError);
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
      await expect(
        store.revertRefund({ orderId: 'apply-3', operationId: 'op-c2', compensationKey: 'comp-c2' }),
      ).rejects.toThrow(InvalidOperationError);
    });

    it('rejects an unknown order and a non-positive amount', async () => {
      await expect(
        store.applyRefund({ orderId: 'nope', operationId: 'op-n', refundId: 're_n', amount: 1 }),
      ).rejects.toThrow(OrderNotFoundError);
      await expect(
        store.applyRefund({ orderId: 'apply-3', operationId: 'op-z', refundId: 're_z', amount: 0 }),
      ).rejects.toThrow(InvalidOperationError);
    });
  });

  describe('optimistic concurrency', () => {
    it('throws VersionConflictError when another connection commits between the read and the write', async () => {
      await store.seedOrder(order('race-1'));
      const other = await open({ asAnotherProcess: true });
      let committed: unknown;
      const racing = await open({
        beforeOrderWrite: async () => {
          // The other connection commits inside our transaction, after our read.
          committed ??= await other.applyRefund({
            orderId: 'race-1',
            operationId: 'op-r-other',
            refundId: 're_o',
            amount: 100,
          });
        },
      });
      const attempt = racing.applyRefund({
        orderId: 'race-1',
        operationId: 'op-r-mine',
        refundId: 're_m',
        amount: 200,
      });
      // SQLite refuses to upgrade a stale read snapshot (SQLITE_BUSY_SNAPSHOT), PostgreSQL a serializable
      // transaction's write over a concurrent one (40001); the store reports either as a version conflict.
      await expect(attempt).rejects.toThrow(VersionConflictError);
      await expect(attempt).rejects.toThrow(/another writer changed the order/);
      expect(committed).toMatchObject({ changed: true, version: 2 });
      expect((await store.getOrder('race-1'))?.refundedAmount).toBe(100);

      // The retry reads the canonical state and succeeds on top of the other write.
      await expect(
        racing.applyRefund({ orderId: 'race-1', operationId: 'op-r-mine', refundId: 're_m', amount: 200 }),
      ).resolves.toMatchObject({
        refundedAmount: 300,
        version: 3,
        changed: true,
      });
    });

    it('throws VersionConflictError when the conditional update matches no row', async () => {
      await store.seedOrder(order('race-2'));
      let interfered = false;
      const racing = await open({
        beforeOrderWrite: async (orderId, tx) => {
          if (interfered) return;
          interfered = true;
          // A write inside our own transaction moves the version on under us.
          await tx.run(sql`UPDATE orders SET version = version + 1 WHERE id = ${orderId}`);
        },
      });
      await expect(
        racing.applyRefund({ orderId: 'race-2', operationId: 'op-s-mine', refundId: 're_m', amount: 200 }),
      ).rejects.toThrow(/changed after it was read at version 1/);
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
      await expect(
        store.applyRefund({ orderId: 'revert-1', operationId: 'op-d1', refundId: 're_d1', amount: 1000 }),
      ).resolves.toMatchObject({
        refundedAmount: 0,
        changed: false,
      });
    });

    it('subtracts only its own amount when a later refund was applied after it', async () => {
      await store.seedOrder(order('revert-2'));
      await store.applyRefund({ orderId: 'revert-2', operationId: 'op-e1', refundId: 're_e1', amount: 300 });
      await store.applyRefund({ orderId: 'revert-2', operationId: 'op-e2', refundId: 're_e2', amount: 200 });
      await expect(
        store.revertRefund({ orderId: 'revert-2', operationId: 'op-e1', compensationKey: 'comp-e1' }),
      ).resolves.toEqual({
        orderId: 'revert-2',
        status: 'partially_refunded',
        refundedAmount: 200,
        version: 4,
        changed: true,
      });
      await expect(
        store.revertRefund({ orderId: 'revert-2', operationId: 'op-e2', compensationKey: 'comp-e2' }),
      ).resolves.toMatchObject({
        status: 'paid',
        refundedAmount: 0,
      });
    });

    it('refuses an operation never applied and a compensation key reused for another operation', async () => {
      await expect(
        store.revertRefund({ orderId: 'revert-2', operationId: 'op-never', compensationKey: 'comp-x' }),
      ).rejects.toThrow(/was never applied/);
      await store.applyRefund({ orderId: 'revert-1', operationId: 'op-d2', refundId: 're_d2', amount: 10 });
      await expect(
        store.revertRefund({ orderId: 'revert-1', operationId: 'op-d2', compensationKey: 'op-d1:compensate' }),
      ).rejects.toThrow(IntentConflictError);
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

    it('claims a hand-over in one call: ours while pending, not once sending or sent, the attempt counted each time', async () => {
      const key = 'refund-o4-v1:notify:v1';
      const mine = { ...entry, key, messageId: '<refund-o4-v1.notify.v1@durable-refunds.local>' };
      const first = await store.claimHandOver(mine);
      expect(first).toMatchObject({ ours: true, claimed: { status: 'pending', attempts: 1 } });
      await expect(store.getNotification(key)).resolves.toMatchObject({ status: 'sending', attempts: 1 });
      await expect(store.claimHandOver(mine)).resolves.toMatchObject({
        ours: false,
        claimed: { status: 'sending', attempts: 2 },
      });
      await store.markNotificationSent(key, '250 OK');
      await expect(store.claimHandOver(mine)).resolves.toMatchObject({
        ours: false,
        claimed: { status: 'sent', attempts: 3 },
      });
      await expect(store.claimHandOver({ ...mine, subject: 'Other' })).rejects.toThrow(IntentConflictError);
      await expect(store.getNotification(key)).resolves.toMatchObject({ status: 'sent', attempts: 3 });
    });

    it('refuses a changed intent under the same key', async () => {
      await expect(store.claimNotification({ ...entry, recipient: 'someone-else@example.test' })).rejects.toThrow(
        IntentConflictError,
      );
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

      // A second connection stands in for a second worker.
      const other = await open();
      // Exactly one of two racing callers takes it (which one is up to the database).
      expect(
        (await Promise.all([store.markNotificationSending(key), other.markNotificationSending(key)])).sort(),
      ).toEqual([false, true]);
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

    it("records each hand-over's own bound with its stamp, and frees or takes over only the hand-over named", async () => {
      const key = 'refund-o5-v1:notify:v1';
      const mine = { ...entry, key, messageId: '<refund-o5-v1.notify.v1@durable-refunds.local>' };
      const { stamp } = await store.claimHandOver(mine, 7000);
      const held = await store.getNotification(key);
      expect(held).toMatchObject({ status: 'sending', sendingSince: stamp });
      expect(Date.parse(held!.sendingUntil!) - Date.parse(stamp!)).toBe(7000);
      // Not yet ended by the rule given, and never for a stamp that is no longer the current one.
      await expect(store.takeOverNotification(key, stamp!, { endedAfterMs: 60_000, onWireForMs: 3000 })).resolves.toBe(
        null,
      );
      await expect(store.takeOverNotification(key, '2000-01-01T00:00:00.000Z', { endedAfterMs: 0 })).resolves.toBe(
        null,
      );
      const next = await store.takeOverNotification(key, stamp!, { endedAfterMs: 0, onWireForMs: 3000 });
      expect(Date.parse(next!)).toBeGreaterThan(Date.parse(stamp!));
      const taken = await store.getNotification(key);
      expect(Date.parse(taken!.sendingUntil!) - Date.parse(next!)).toBe(3000);
      // The first hand-over's release does not free the one that took it over.
      await expect(store.releaseNotification(key, stamp!)).resolves.toBe(false);
      await expect(store.releaseNotification(key, next!)).resolves.toBe(true);
      await expect(store.getNotification(key)).resolves.toMatchObject({
        status: 'pending',
        sendingSince: null,
        sendingUntil: null,
      });
      // Re-stamped as a worker from before bounds were recorded takes a hand-over over: the previous stamp's bound is
      // left in the row, and never read as the new stamp's.
      await expect(store.markNotificationSending(key, 7000)).resolves.toBe(true);
      // Another stamp than the one marked: the current time could be the same millisecond.
      const restamped = new Date(Date.parse((await store.getNotification(key))!.sendingSince!) + 1).toISOString();
      const raw = dialect === 'sqlite' ? openSqlite(url.slice('sqlite:'.length)) : await openPostgres(url);
      try {
        await raw.run(sql`UPDATE notification_outbox SET sending_since = ${restamped} WHERE key = ${key}`);
      } finally {
        await raw.close();
      }
      await expect(store.getNotification(key)).resolves.toMatchObject({ status: 'sending', sendingUntil: null });
    });

    it('keeps a sending entry sending across close and reopen', async () => {
      const key = 'refund-o3-v1:notify:v1';
      const first = await openStore(url);
      await first.claimNotification({ ...entry, key, messageId: '<refund-o3-v1.notify.v1@durable-refunds.local>' });
      await expect(first.markNotificationSending(key)).resolves.toBe(true);
      await first.close();

      const second = await open();
      await expect(second.getNotification(key)).resolves.toMatchObject({ status: 'sending', attempts: 1 });
      await expect(
        second.claimNotification({ ...entry, key, messageId: '<refund-o3-v1.notify.v1@durable-refunds.local>' }),
      ).resolves.toMatchObject({
        status: 'sending',
        attempts: 2,
      });
      await expect(second.markNotificationSending(key)).resolves.toBe(false);
    });
  });

  describe('persistence', () => {
    it('keeps state across close and reopen', async () => {
      const first = await openStore(url);
      await first.seedOrder(order('persist-1'));
      await first.applyRefund({ orderId: 'persist-1', operationId: 'op-p1', refundId: 're_p1', amount: 250 });
      await first.close();
      await first.close();

      const second = await open();
      await expect(second.getOrder('persist-1')).resolves.toMatchObject({
        refundedAmount: 250,
        status: 'partially_refunded',
        version: 2,
      });
      await expect(
        second.applyRefund({ orderId: 'persist-1', operationId: 'op-p1', refundId: 're_p1', amount: 250 }),
      ).resolves.toMatchObject({ changed: false });
    });
  });

  describe('a schema a later build migrated', () => {
    // During a rollout the new build migrates the store (expand only) while workers of this one still run, and
    // restart: they must open it, not refuse it for migrations they do not know.
    const migratedBy = async (add: string, remove?: string) => {
      const url = await freshDatabase(dialect, dir);
      await (await openStore(url)).close();
      const db = dialect === 'postgres' ? await openPostgres(url) : openSqlite(new URL(url).pathname);
      try {
        const at = new Date().toISOString();
        await sql`INSERT INTO kysely_migration (name, timestamp) VALUES (${add}, ${at})`.execute(db.kysely);
        if (remove) await sql`DELETE FROM kysely_migration WHERE name = ${remove}`.execute(db.kysely);
      } finally {
        await db.close();
      }
      return url;
    };

    it('opens it when every migration of its own is applied', async () => {
      const later = await openStore(await migratedBy('007_from_a_later_build'));
      try {
        await later.seedOrder(order('later-1'));
        await expect(later.getOrder('later-1')).resolves.toMatchObject({ version: 1 });
      } finally {
        await later.close();
      }
    });

    it('refuses one that lacks a migration of its own: another branch migrated it', async () => {
      const branch = await migratedBy('002_off_the_wire_by_elsewhere', '004_sending_until');
      await expect(openStore(branch)).rejects.toThrow(
        "the store's schema was migrated by a build that is not a later release of this one: it has 002_off_the_wire_by_elsewhere, which this build does not know, and lacks 004_sending_until",
      );
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
      expect(first).toMatchObject({
        created: true,
        record: { status: 'intent', requestHash: 'h-500', requestsSent: 0, firstSentAt: null, createdBy: 'wf-1' },
      });
      await expect(store.operations.commitIntent({ ...intent('op:v1'), actor: 'wf-2' })).resolves.toMatchObject({
        created: false,
        record: { createdBy: 'wf-1' },
      });
      await expect(store.operations.commitIntent(intent('op:v1', 700))).rejects.toThrow(IntentConflictError);
      await expect(store.operations.commitIntent(intent('op:v1', 700))).rejects.toThrow(
        /first requested as 500 usd .* needs a new operation version/,
      );
      await expect(store.operations.get('op:v1')).resolves.toMatchObject({
        requestHash: 'h-500',
        request: { amount: 500 },
      });
    });

    it('stamps each send and settles with an audit entry in the same transaction', async () => {
      await store.operations.commitIntent(intent('op:v2'));
      const sent = await store.operations.markSent('op:v2', 'wf-1', 11_000);
      const again = await store.operations.markSent('op:v2', 'wf-1', 11_000);
      expect(again).toMatchObject({ requestsSent: 2, firstSentAt: sent.firstSentAt });
      expect(again.lastSentAt! >= sent.lastSentAt!).toBe(true);
      const receipt = {
        refundId: 're_1',
        paymentIntentId: 'pi_1',
        amount: 500,
        currency: 'usd',
        status: 'succeeded',
        created: 1,
        operationId: 'op:v2',
        replayed: false,
      };
      await store.operations.settle(
        'op:v2',
        { status: 'unknown', reason: 'response_lost' },
        'wf-1',
        'refund_outcome_unknown',
      );
      await expect(
        store.operations.settle('op:v2', { status: 'refunded', refund: receipt }, 'wf-1', 'reconciled', {
          result: 'completed',
        }),
      ).resolves.toMatchObject({
        applied: true,
        record: { status: 'refunded', refund: receipt },
      });
      await store.operations.settle('op:v2', { status: 'completed' }, 'wf-1', 'completion_gate_passed');
      // A late writer never moves it backwards: a timed-out attempt's "unknown", a stale absence proof.
      await expect(
        store.operations.settle('op:v2', { status: 'unknown' }, 'wf-2', 'refund_outcome_unknown'),
      ).resolves.toMatchObject({ applied: false, record: { status: 'completed' } });
      await expect(
        store.operations.settle('op:v2', { status: 'intent', absenceConfirmedAt: 'x' }, 'wf-2', 'reconciled'),
      ).resolves.toMatchObject({ applied: false, record: { absenceConfirmedAt: null } });
      const trail = await store.operations.auditTrail('op:v2');
      expect(trail.map((e) => e.event)).toEqual([
        'intent_committed',
        'refund_request_sent',
        'refund_request_sent',
        'refund_outcome_unknown',
        'reconciled',
        'completion_gate_passed',
        'refund_outcome_unknown',
        'reconciled',
      ]);
      expect(trail[4].detail).toEqual({ status: 'refunded', result: 'completed' });
      expect(trail[6].detail).toEqual({ status: 'unknown', ignored: 'status stays completed' });
      await expect(store.operations.markSent('op:nobody', 'x', 11_000)).rejects.toThrow(/commit its intent first/);
      expect((await store.operations.forOrder('ops-1')).map((o) => o.operation.operationId)).toEqual([
        'op:v1',
        'op:v2',
      ]);
    });

    it("keeps the latest bound over its sends of when they are off the wire, each by its sender's timeout", async () => {
      await store.operations.commitIntent({ ...intent('wire:v1'), orderId: 'ops-wire' });
      const long = await store.operations.markSent('wire:v1', 'wf-long', 31_000);
      expect(Date.parse(long.offTheWireBy!)).toBe(Date.parse(long.lastSentAt!) + 31_000);
      // A later send by a worker with a shorter timeout does not shorten the earlier one, still out.
      const short = await store.operations.markSent('wire:v1', 'wf-short', 11_000);
      expect(short.offTheWireBy).toBe(long.offTheWireBy);
    });

    it('proves absence only if nothing was sent since the lookup', async () => {
      await store.operations.commitIntent(intent('op:v3'));
      const seen = (await store.operations.markSent('op:v3', 'wf-3', 11_000)).requestsSent;
      await store.operations.settle('op:v3', { status: 'unknown' }, 'wf-3', 'refund_outcome_unknown');
      await store.operations.settle(
        'op:v3',
        { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: seen },
        'wf-4',
        'reconciled',
      );
      await expect(store.operations.get('op:v3')).resolves.toMatchObject({
        status: 'intent',
        requestsSent: 1,
        provenAbsentThrough: 1,
      });
      await store.operations.markSent('op:v3', 'wf-3', 11_000);
      // A proof taken before that send covers it no longer, and none can be set on its strength.
      await expect(store.operations.get('op:v3')).resolves.toMatchObject({ requestsSent: 2, provenAbsentThrough: 1 });
      const stale = await store.operations.settle(
        'op:v3',
        { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: seen },
        'wf-4',
        'reconciled',
      );
      expect(stale).toMatchObject({ applied: false, record: { provenAbsentThrough: 1 } });
    });

    it('lets only the highest version of an order send, and only while no other has a send not proven absent', async () => {
      const on = (id: string, version: number) => ({
        ...intent(id),
        orderId: 'ops-2',
        operationVersion: version,
        request: { ...intent(id).request, orderId: 'ops-2' },
      });
      await store.operations.commitIntent(on('o2:v1', 1));
      await store.operations.markSent('o2:v1', 'wf-1', 11_000);
      await store.operations.commitIntent(on('o2:v2', 2));
      // v1's send is out: v2 waits for it.
      await expect(store.operations.markSent('o2:v2', 'wf-2', 11_000)).rejects.toThrow(OperationInFlightError);
      // v2 exists: v1 never sends again, and no new operation may come in below v2.
      await expect(store.operations.markSent('o2:v1', 'wf-1', 11_000)).rejects.toThrow(LaterVersionError);
      await expect(store.operations.commitIntent(on('o2:v0', 0))).rejects.toThrow(
        /already has operation o2:v2; a new operation needs a version above it/,
      );
      await store.operations.settle('o2:v1', { status: 'refunded' }, 'wf-1', 'refund_confirmed');
      await expect(store.operations.markSent('o2:v2', 'wf-2', 11_000)).resolves.toMatchObject({ requestsSent: 1 });

      // A refused operation sent after all counts as in flight until it is settled.
      await store.operations.settle('o2:v2', { status: 'rejected', reason: 'no' }, 'wf-2', 'rejected');
      await store.operations.commitIntent(on('o2:v3', 3));
      await expect(store.operations.markSent('o2:v3', 'wf-3', 11_000)).rejects.toThrow(OperationInFlightError);
      await store.operations.settle(
        'o2:v2',
        { status: 'intent', absenceConfirmedAt: new Date().toISOString(), ifRequestsSent: 1 },
        'wf-3',
        'reconciled',
      );
      await expect(store.operations.markSent('o2:v3', 'wf-3', 11_000)).resolves.toMatchObject({ requestsSent: 1 });
    });

    it('keeps each attempt of a step per run, including one that never finished', async () => {
      const open = (runId: string, attempt: number) =>
        store.operations.openAttempt({
          key: 'k',
          step: 'create_refund',
          operationId: 'op:v2',
          workflowId: 'wf',
          runId,
          attempt,
        });
      const a = open('r1', 1);
      await a.begun();
      const finished = await a.finish({
        transportRequests: 1,
        outcome: 'RATE_LIMIT',
        certainty: 'not_executed',
        reason: 'rate_limited',
        retryAfterMs: 1000,
        nextDelayMs: 1100,
        providerRequestId: 'req_1',
      });
      const secondRow = open('r1', 2);
      const second = await secondRow.begun();
      // Another run's first attempt under the same key is the first of its run.
      const otherRun = open('r2', 1);
      await otherRun.begun();
      // Alone when it ends: the first row was, the second has the first beside it, the other run's is its run's only one.
      expect(finished?.alone).toBe(true);
      expect((await otherRun.finish(OK_END))?.alone).toBe(true);
      const ledger = await store.operations.attempts('k', 'r1');
      // What begin and finish said they wrote is what is read back.
      expect(ledger[0]).toMatchObject({ startedAt: a.startedAt, finishedAt: finished!.finishedAt });
      expect(ledger[1]).toMatchObject({ id: second.id, startedAt: second.startedAt });
      expect(ledger.map((r) => [r.attempt, r.outcome, r.transportRequests, r.finishedAt === null])).toEqual([
        [1, 'RATE_LIMIT', 1, false],
        [2, null, 0, true],
      ]);
      expect(ledger[0]).toMatchObject({ retryAfterMs: 1000, nextDelayMs: 1100, providerRequestId: 'req_1' });
    });

    it('writes an attempt’s row in the transactions the attempt commits, none of its own', async () => {
      let commits = 0;
      const counted = await open({ observer: { statement: () => undefined, commit: () => commits++ } });
      await counted.seedOrder(order('ride-1'));
      const attempt = { step: 'create_refund', workflowId: 'wf', runId: 'r', attempt: 1 };
      const rows = (key: string) => counted.operations.attempts(key, 'r');
      const row = counted.operations.openAttempt({ ...attempt, key: 'ride:a', operationId: 'ride-1:v1' });
      const sent = { ...OK_END, transportRequests: 1, providerRequestId: 'req_r' };
      commits = 0;
      await row.run(async () => {
        // The first transaction carries the row's beginning; a request's begun() then finds it on disk.
        await counted.operations.commitIntent({ ...intent('ride-1:v1'), orderId: 'ride-1' });
        expect(await rows('ride:a')).toMatchObject([{ attempt: 1, finishedAt: null, outcome: null }]);
        await row.begun();
        // A later transaction carries nothing; the one recording the effect carries the end.
        await counted.operations.markSent('ride-1:v1', 'wf', 10_000);
        await row.recording(
          () => sent,
          () => counted.operations.settle('ride-1:v1', { status: 'unknown', reason: 'x' }, 'wf', 'probe'),
        );
      });
      expect(commits).toBe(3);
      // PostgreSQL does not count the step's other rows inside a transaction (SERIALIZABLE would lock the ledger's
      // index page for it, where concurrent runs insert theirs): not known alone, the caller reads the ledger back.
      expect(await row.finish(sent)).toMatchObject({ alone: dialect === 'sqlite' });
      expect(commits).toBe(3);
      expect(await rows('ride:a')).toMatchObject([{ outcome: 'ok', transportRequests: 1, providerRequestId: 'req_r' }]);
      // An end other than the one written with the effect (the attempt failed after it) is written over it.
      await row.finish({ ...sent, outcome: 'STATE_CONFLICT', reason: 'later' });
      expect(commits).toBe(4);
      expect(await rows('ride:a')).toMatchObject([{ outcome: 'STATE_CONFLICT', reason: 'later' }]);

      // A transaction that fails carries nothing; requests made at once begin the row once, alone.
      const lone = counted.operations.openAttempt({ ...attempt, key: 'ride:b', operationId: 'ride-1:v1' });
      commits = 0;
      await lone.run(async () => {
        await expect(
          counted.operations.commitIntent({ ...intent('ride-1:v1', 500, 'changed'), orderId: 'ride-1' }),
        ).rejects.toThrow(IntentConflictError);
        expect(await rows('ride:b')).toEqual([]);
        const [one, two] = await Promise.all([lone.begun(), lone.begun(), lone.begun()]);
        expect(two).toEqual(one);
      });
      expect(commits).toBe(1);
      expect(await rows('ride:b')).toHaveLength(1);
      // An attempt that never wrote its row writes it whole at the end, in one commit.
      const late = counted.operations.openAttempt({ ...attempt, key: 'ride:c', operationId: 'ride-1:v1' });
      commits = 0;
      await expect(late.finish(OK_END)).resolves.toMatchObject({ alone: true });
      expect(commits).toBe(1);
      expect(await rows('ride:c')).toMatchObject([{ startedAt: late.startedAt, outcome: 'ok' }]);
      // An attempt that has ended sends nothing more under its row, even when asked as it ends.
      await expect(late.begun()).rejects.toThrow(/has ended: nothing more is sent under it/);
      const racing = counted.operations.openAttempt({ ...attempt, key: 'ride:e', operationId: 'ride-1:v1' });
      const [ended, asked] = await Promise.allSettled([racing.finish(OK_END), racing.begun()]);
      expect([ended.status, asked.status]).toEqual(['fulfilled', 'rejected']);
      expect(await rows('ride:e')).toHaveLength(1);
      // Rows are written when first needed: the ledger still lists them by when each attempt began.
      const first = counted.operations.openAttempt({ ...attempt, key: 'ride:f', operationId: 'ride-1:v1' });
      await new Promise((resolve) => setTimeout(resolve, 5));
      const second = counted.operations.openAttempt({
        ...attempt,
        key: 'ride:f',
        operationId: 'ride-1:v1',
        attempt: 2,
      });
      await second.begun();
      await first.begun();
      expect((await rows('ride:f')).map((r) => r.attempt)).toEqual([1, 2]);
    });

    it('begins a row beside another attempt in the transaction that records that attempt’s effect, in no other', async () => {
      let commits = 0;
      const counted = await open({ observer: { statement: () => undefined, commit: () => commits++ } });
      await counted.seedOrder(order('ride-3'));
      const attempt = { workflowId: 'wf', runId: 'r', attempt: 1, operationId: 'ride-3:v1' };
      const rows = (key: string) => counted.operations.attempts(key, 'r');
      const host = counted.operations.openAttempt({ ...attempt, step: 'notify_customer', key: 'ride:h' });
      const look = counted.operations.openAttempt({ ...attempt, step: 'completion_gate', key: 'ride:g' });
      commits = 0;
      await look.alongside(() =>
        host.run(async () => {
          // The host's first transaction carries its own row, not the look's.
          await counted.operations.commitIntent({ ...intent('ride-3:v1'), orderId: 'ride-3' });
          expect(await rows('ride:g')).toEqual([]);
          // A recording that fails carries nothing of either.
          await expect(
            host.recording(
              () => OK_END,
              () => counted.operations.commitIntent({ ...intent('ride-3:v1', 500, 'changed'), orderId: 'ride-3' }),
            ),
          ).rejects.toThrow(IntentConflictError);
          expect(await rows('ride:g')).toEqual([]);
          await host.recording(
            () => OK_END,
            () => counted.operations.settle('ride-3:v1', { status: 'unknown', reason: 'x' }, 'wf', 'probe'),
          );
        }),
      );
      expect(commits).toBe(2);
      expect(await rows('ride:h')).toMatchObject([{ outcome: 'ok' }]);
      expect(await rows('ride:g')).toMatchObject([{ attempt: 1, startedAt: look.startedAt, finishedAt: null }]);
      // On disk before the look's first request: begun() writes nothing; its end rides in its own recording.
      commits = 0;
      await look.begun();
      await look.run(() =>
        look.recording(
          () => OK_END,
          () => counted.operations.settle('ride-3:v1', { status: 'completed' }, 'wf', 'gate'),
        ),
      );
      expect(commits).toBe(1);
      expect(await rows('ride:g')).toMatchObject([{ outcome: 'ok', finishedAt: expect.any(String) }]);

      // A row beside that cannot be written fails the transaction, and releases the host's own row: its end is
      // written alone afterwards, not waited for forever.
      const host2 = counted.operations.openAttempt({ ...attempt, step: 'notify_customer', key: 'ride:h2' });
      const broken = counted.operations.openAttempt({ ...attempt, step: 'completion_gate', key: null as never });
      await expect(
        broken.alongside(() =>
          host2.recording(
            () => OK_END,
            () => counted.operations.settle('ride-3:v1', { status: 'unknown', reason: 'y' }, 'wf', 'probe'),
          ),
        ),
      ).rejects.toThrow();
      await expect(host2.finish(OK_END)).resolves.toMatchObject({ finishedAt: expect.any(String) });
      expect(await rows('ride:h2')).toMatchObject([{ outcome: 'ok' }]);
    });

    it('keeps an attempt’s row in its own transaction when a store fault’s writer opens one inside it', async () => {
      const faulty = await open({ faults: true });
      await faulty.seedOrder(order('ride-2'));
      const row = faulty.operations.openAttempt({
        key: 'ride:d',
        step: 'update_order',
        operationId: 'ride-2:v1',
        workflowId: 'wf',
        runId: 'r',
        attempt: 1,
      });
      // The faults' second connection reads its table inside the order write; were it to carry the row, it would
      // commit it apart, and on SQLite the order write would then find its snapshot stale.
      await expect(
        row.run(() =>
          row.recording(
            () => OK_END,
            () => faulty.applyRefund({ orderId: 'ride-2', operationId: 'ride-2:v1', refundId: 're_2', amount: 100 }),
          ),
        ),
      ).resolves.toMatchObject({ changed: true });
      expect(await faulty.operations.attempts('ride:d', 'r')).toMatchObject([{ outcome: 'ok' }]);
    });

    it('takes store faults only from a store opened with faults on, and refuses a nonsense count', async () => {
      await expect(store.faults.add({ kind: 'conflict', count: 0 })).rejects.toThrow(/count must be 1-1000/);
      const fault = await store.faults.add({ kind: 'conflict', orderId: 'apply-1' });
      expect(fault).toMatchObject({ kind: 'conflict', orderId: 'apply-1', remaining: 1, hits: 0 });
      await store.faults.clear();
      await expect(store.faults.list()).resolves.toEqual([]);
    });
  });

  describe("the order update carried in the refund receipt's transaction", () => {
    /** A refund sent for a fresh order of 1000, its receipt for `amount` settled with the order update carried. */
    async function settleCarrying(on: OrderStore, orderId: string, amount: number) {
      const operationId = `refund:test:${orderId}:v1`;
      await on.seedOrder(order(orderId));
      const request = { orderId, amount, currency: 'usd', reason: 'requested_by_customer' };
      await on.operations.commitIntent({
        operationId,
        orderId,
        operationVersion: 1,
        scope: 'test',
        requestHash: 'h',
        request,
        actor: 'wf',
      });
      await on.operations.markSent(operationId, 'wf', 11_000);
      const refund = {
        refundId: `re_${orderId}`,
        paymentIntentId: `pi_${orderId}`,
        amount,
        currency: 'usd',
        status: 'succeeded',
        created: 1,
        operationId,
        replayed: false,
      };
      const row = {
        key: `${operationId}:update_order`,
        step: 'update_order',
        operationId,
        workflowId: 'wf',
        runId: 'run',
        attempt: 1,
      };
      const apply = { orderId, operationId, refundId: refund.refundId, amount, actor: 'wf' };
      const settled = await on.operations.settle(
        operationId,
        { status: 'refunded', refund },
        'wf',
        'refund_confirmed',
        {},
        (tx) => on.carryRefund(tx, apply, row, OK_END),
      );
      return { operationId, settled, row };
    }

    it('commits the receipt and the order update together, with the order step’s attempt row', async () => {
      let commits = 0;
      const counted = await open({ observer: { statement: () => undefined, commit: () => commits++ } });
      commits = 0;
      const seeded = await counted.seedOrder(order('carried-1'));
      expect(seeded.version).toBe(1);
      commits = 0;
      const { operationId, settled, row } = await settleCarrying(counted, 'carried-2', 400);
      expect(settled.carried).toMatchObject({
        orderId: 'carried-2',
        refundedAmount: 400,
        status: 'partially_refunded',
        changed: true,
        evidence: {
          attempt: 1,
          ledger: [expect.objectContaining({ attempt: 1, outcome: 'ok', transportRequests: 0 })],
        },
      });
      expect(settled.record.status).toBe('refunded');
      expect((await store.getOrder('carried-2'))!.refundedAmount).toBe(400);
      expect((await store.operations.attempts(row.key, 'run')).map((a) => a.outcome)).toEqual(['ok']);
      const trail = (await store.operations.auditTrail(operationId)).map((e) => e.event);
      expect(trail.slice(-2)).toEqual(['refund_confirmed', 'order_updated']);
      // The seed, the intent, the stamp, then the receipt with the order in one.
      expect(commits).toBe(4);
    });

    it('an update the order refuses is undone alone: the receipt commits, the order step is left to its own task', async () => {
      const { operationId, settled, row } = await settleCarrying(store, 'carried-3', 1500);
      expect(settled.carried).toBeUndefined();
      expect(settled.record.status).toBe('refunded');
      expect(await store.getOrder('carried-3')).toMatchObject({ refundedAmount: 0, version: 1 });
      expect(await store.appliedRefund(operationId)).toBeUndefined();
      expect(await store.operations.attempts(row.key, 'run')).toEqual([]);
      expect((await store.operations.auditTrail(operationId)).map((e) => e.event).at(-1)).toBe('refund_confirmed');
      // Its own task then meets the refusal, as it would have without the carriage.
      await expect(
        store.applyRefund({ orderId: 'carried-3', operationId, refundId: 're_carried-3', amount: 1500 }),
      ).rejects.toThrow(RefundExceedsOrderError);
    });
  });

  describe('under concurrent connections', () => {
    const workers = 6;
    let connections: OrderStore[];

    beforeAll(async () => {
      connections = await Promise.all(Array.from({ length: workers }, () => open()));
    });

    /** Retries a version conflict, as the activity's next attempt would. */
    async function untilApplied<T>(fn: () => Promise<T>): Promise<T> {
      for (;;) {
        try {
          return await fn();
        } catch (err) {
          if (!(err instanceof VersionConflictError)) throw err;
        }
      }
    }

    it('applies one operation once and different operations each once', async () => {
      await store.seedOrder(order('many-1', 6000));
      const same = await Promise.all(
        connections.map((c) =>
          untilApplied(() =>
            c.applyRefund({ orderId: 'many-1', operationId: 'op-many-same', refundId: 're_same', amount: 1000 }),
          ),
        ),
      );
      expect(same.filter((r) => r.changed)).toHaveLength(1);
      await Promise.all(
        connections.map((c, i) =>
          untilApplied(() =>
            c.applyRefund({ orderId: 'many-1', operationId: `op-many-${i}`, refundId: `re_${i}`, amount: 500 }),
          ),
        ),
      );
      // 1000 once, and 500 from each connection: no write lost, none doubled.
      await expect(store.getOrder('many-1')).resolves.toMatchObject({
        refundedAmount: 1000 + workers * 500,
        version: 2 + workers,
      });
    });

    it('commits an intent once, queues a request once and hands one notification over once', async () => {
      const intent = {
        operationId: 'many:v1',
        orderId: 'many-2',
        operationVersion: 1,
        scope: 'test',
        requestHash: 'h',
        request: { orderId: 'many-2', amount: 5, currency: 'usd', reason: 'duplicate' },
        actor: 'wf',
      };
      const intents = await Promise.all(connections.map((c) => c.operations.commitIntent(intent)));
      expect(intents.filter((r) => r.created)).toHaveLength(1);

      const request = {
        orderId: 'many-2',
        amount: 5,
        currency: 'usd',
        reason: 'duplicate' as const,
        requestedBy: 'ops',
        operationVersion: 1,
      };
      const queued = await Promise.all(connections.map((c) => c.queue.enqueue(request, 'cli')));
      expect(queued.filter((q) => q.created)).toHaveLength(1);
      expect(new Set(queued.map((q) => q.queued.id)).size).toBe(1);

      const entry = {
        key: 'many-2:notify',
        orderId: 'many-2',
        kind: 'refund_notice' as const,
        recipient: 'a@example.test',
        subject: 's',
        messageId: '<m@x>',
      };
      await Promise.all(connections.map((c) => c.claimNotification(entry)));
      await expect(store.getNotification(entry.key)).resolves.toMatchObject({ attempts: workers, status: 'pending' });
      const takers = await Promise.all(connections.map((c) => c.markNotificationSending(entry.key)));
      expect(takers.filter(Boolean)).toHaveLength(1);
      // Claim and take at once, as the hand-over does: exactly one of them holds it.
      const handOver = { ...entry, key: 'many-2:notify:2', messageId: '<m2@x>' };
      const claims = await Promise.all(connections.map((c) => c.claimHandOver(handOver)));
      expect(claims.filter((c) => c.ours)).toHaveLength(1);
      await expect(store.getNotification(handOver.key)).resolves.toMatchObject({
        attempts: workers,
        status: 'sending',
      });
    });

    it('never lets two versions of one order both send', async () => {
      const on = (version: number) => ({
        operationId: `many-3:v${version}`,
        orderId: 'many-3',
        operationVersion: version,
        scope: 'test',
        requestHash: `h${version}`,
        request: { orderId: 'many-3', amount: 5, currency: 'usd', reason: 'duplicate' },
        actor: 'wf',
      });
      for (const v of [1, 2, 3]) await store.operations.commitIntent(on(v));
      const sends = await Promise.allSettled(
        connections.map((c, i) => c.operations.markSent(`many-3:v${(i % 3) + 1}`, 'wf', 11_000)),
      );
      const sent = sends
        .filter((r) => r.status === 'fulfilled')
        .map((r) => (r as PromiseFulfilledResult<{ operationId: string }>).value.operationId);
      // Only the highest version may send; whichever connection got there, no other version followed.
      expect(new Set(sent)).toEqual(new Set(['many-3:v3']));
      for (const r of sends) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LaterVersionError);
    });
  });
});

describe('SQLite files and DATABASE_URL', () => {
  it('uses WAL mode on a file', async () => {
    const url = await freshDatabase('sqlite', dir);
    const s = await openStore(url);
    await s.close();
    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
  });

  it('syncs every commit to disk (synchronous FULL), not only at checkpoints', async () => {
    const db = openSqlite(path.join(dir, 'synchronous.db'));
    try {
      await db.run(sql`CREATE TABLE t (x INTEGER)`);
      await db.run(sql`INSERT INTO t VALUES (1)`);
      // On the connection that wrote (the setting is the connection's): WAL mode's default would say 1 (NORMAL) by now.
      expect(await db.one(sql<{ synchronous: number }>`PRAGMA synchronous`)).toEqual({ synchronous: 2 });
    } finally {
      await db.close();
    }
  });

  it('opens relative and in-memory SQLite URLs', async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const relative = await openStore('sqlite:rel/orders.db');
      await relative.close();
      expect(fs.existsSync(path.join(dir, 'rel', 'orders.db'))).toBe(true);
    } finally {
      process.chdir(cwd);
    }
    const memory = await openStore('sqlite::memory:');
    await expect(memory.seedOrder(order('mem-1'))).resolves.toMatchObject({ id: 'mem-1' });
    await memory.close();
    await expect(openStore('sqlite::memory:', { faults: true })).rejects.toThrow(/need a database file/);
  });

  it('brings a file made before migrations up to date, keeping what the outbox holds', async () => {
    const file = path.join(dir, 'legacy.db');
    const legacy = new Database(file);
    // The outbox as the first versions made it: no sending_since, and a CHECK that refuses digests.
    legacy.exec(`CREATE TABLE notification_outbox (key TEXT PRIMARY KEY, order_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('refund_notice', 'refund_correction')), recipient TEXT NOT NULL, subject TEXT NOT NULL,
      message_id TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent')), attempts INTEGER NOT NULL,
      provider_response TEXT, created_at TEXT NOT NULL, sent_at TEXT) STRICT`);
    legacy
      .prepare(
        `INSERT INTO notification_outbox VALUES ('k1', 'o1', 'refund_notice', 'a@example.test', 's', '<m1@x>', 'sent', 1, '250 OK', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z')`,
      )
      .run();
    legacy.close();

    const upgraded = await openStore(`sqlite:${file}`);
    await expect(upgraded.getNotification('k1')).resolves.toMatchObject({
      status: 'sent',
      providerResponse: '250 OK',
      sendingSince: null,
    });
    await expect(
      upgraded.claimNotification({
        key: 'digest-1',
        orderId: '',
        kind: 'digest',
        recipient: 'ops@example.test',
        subject: 'd',
        messageId: '<d1@x>',
      }),
    ).resolves.toMatchObject({ status: 'pending' });
    await upgraded.close();
    // Opening again finds the schema current and changes nothing.
    const again = await openStore(`sqlite:${file}`);
    await expect(again.getNotification('k1')).resolves.toMatchObject({ status: 'sent' });
    await again.close();
    const check = new Database(file, { readonly: true });
    expect(
      check.prepare("SELECT name FROM sqlite_master WHERE name = 'notification_outbox_old'").get(),
    ).toBeUndefined();
    expect(check.prepare('SELECT name FROM kysely_migration').all()).toEqual([
      { name: '001_initial' },
      { name: '002_off_the_wire_by' },
      { name: '003_orders_fillfactor' },
      { name: '004_sending_until' },
      { name: '005_checkout' },
      { name: '006_refund_sends' },
    ]);
    check.close();
  });

  it('names what is accepted when the URL is not usable', async () => {
    await expect(openStore('mysql://user:secret@db/orders')).rejects.toThrow(
      /unsupported DATABASE_URL "mysql:\/\/\*\*\*@db\/orders": expected "sqlite:\/absolute\/path.db"/,
    );
    await expect(openStore('sqlite:')).rejects.toThrow(/names no usable SQLite file/);
    await expect(openStore('sqlite://host/orders.db')).rejects.toThrow(/names no usable SQLite file/);
  });
});

describe('PostgreSQL URLs', () => {
  it('fails fast, without the password, when nothing listens', async () => {
    const started = Date.now();
    await expect(openStore('postgres://refunds:secret@127.0.0.1:1/orders')).rejects.toThrow(
      /cannot reach PostgreSQL at postgres:\/\/\*\*\*@127.0.0.1:1\/orders within 5000 ms: .*ECONNREFUSED/,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('gives up on a server that never answers instead of hanging', async () => {
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as net.AddressInfo;
    try {
      await expect(openStore(`postgresql://refunds:secret@127.0.0.1:${port}/orders`)).rejects.toThrow(
        /cannot reach PostgreSQL at postgresql:\/\/\*\*\*@127.0.0.1:\d+\/orders within 5000 ms/,
      );
    } finally {
      silent.close();
    }
  });

  it('names a database that does not exist', async () => {
    const missing = new URL(process.env.TEST_POSTGRES_URL!);
    missing.pathname = '/no_such_database';
    await expect(openStore(missing.toString())).rejects.toThrow(
      /cannot reach PostgreSQL .* database "no_such_database" does not exist/,
    );
  });

  it('migrates a new database once, even when stores open it together', async () => {
    const url = await freshDatabase('postgres', dir);
    const stores = await Promise.all([openStore(url), openStore(url), openStore(url)]);
    await stores[0].seedOrder(order('migrated-1'));
    await expect(stores[2].getOrder('migrated-1')).resolves.toMatchObject({ version: 1 });
    for (const s of stores) await s.close();
  });
});

describe('one clock for send stamps', () => {
  it('stamps sends by the PostgreSQL server clock, whatever the worker host clock says', async () => {
    const url = await freshDatabase('postgres', dir);
    const store = await openStore(url);
    const db = await openPostgres(url);
    // A worker whose clock is an hour behind: its stamps would make a send look older than it is.
    const skewed = new OperationLog(db, () => new Date(Date.now() - 3600_000).toISOString());
    try {
      await skewed.commitIntent({
        operationId: 'clock:v1',
        orderId: 'clock',
        operationVersion: 1,
        scope: 'test',
        requestHash: 'h',
        request: { orderId: 'clock', amount: 5, currency: 'usd', reason: 'duplicate' },
        actor: 'wf',
      });
      const before = await store.operations.clock();
      const sent = await skewed.markSent('clock:v1', 'wf', 11_000);
      const after = await store.operations.clock();
      expect(Date.parse(sent.lastSentAt!)).toBeGreaterThanOrEqual(before);
      expect(Date.parse(sent.lastSentAt!)).toBeLessThanOrEqual(after);
      await expect(skewed.clock()).resolves.toBeGreaterThanOrEqual(after);
    } finally {
      await db.close();
      await store.close();
    }
  });
});
