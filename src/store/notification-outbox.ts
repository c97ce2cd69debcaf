// The notification outbox: one row per message key, claimed before the message is sent and moved
// pending → sending → sent by conditional updates, so of two attempts only one hands it over.
import { sql } from 'kysely';
import type { Database, Queryable } from './database';
import { differences, IntentConflictError } from './errors';
import type { SqlOperationLog } from './operation-log';
import type { DeliveryConfirmation, NewOutboxEntry, OrderStore, OutboxEntry } from './types';

type OutboxMethods =
  | 'claimNotification'
  | 'claimHandOver'
  | 'markNotificationSending'
  | 'takeOverNotification'
  | 'releaseNotification'
  | 'markNotificationSent'
  | 'confirmNotificationDelivered'
  | 'getNotification';

interface OutboxRow {
  key: string;
  order_id: string;
  kind: OutboxEntry['kind'];
  recipient: string;
  subject: string;
  message_id: string;
  status: OutboxEntry['status'];
  sending_since: string | null;
  attempts: number;
  provider_response: string | null;
  created_at: string;
  sent_at: string | null;
}

function toOutboxEntry(row: OutboxRow): OutboxEntry {
  return {
    key: row.key,
    orderId: row.order_id,
    kind: row.kind,
    recipient: row.recipient,
    subject: row.subject,
    messageId: row.message_id,
    status: row.status,
    sendingSince: row.sending_since,
    attempts: row.attempts,
    providerResponse: row.provider_response,
    createdAt: row.created_at,
    sentAt: row.sent_at,
  };
}

/** The outbox half of the OrderStore; each call is one transaction, its audit entry written in it. */
export class SqlNotificationOutbox implements Pick<OrderStore, OutboxMethods> {
  constructor(
    private readonly db: Database,
    private readonly operations: SqlOperationLog,
  ) {}

  async claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry> {
    return this.db.transaction((tx) => this.claimIn(tx, entry));
  }

  async claimHandOver(entry: NewOutboxEntry): Promise<{ claimed: OutboxEntry; ours: boolean }> {
    return this.db.transaction(async (tx) => {
      const claimed = await this.claimIn(tx, entry);
      return { claimed, ours: claimed.status === 'pending' && (await this.takeSending(tx, entry.key)) };
    });
  }

  private async claimIn(tx: Queryable, entry: NewOutboxEntry): Promise<OutboxEntry> {
    const existing = await outboxRow(tx, entry.key);
    if (existing) {
      const problems = differences(toOutboxEntry(existing), { ...toOutboxEntry(existing), ...entry }, [
        'orderId',
        'kind',
        'recipient',
        'subject',
        'messageId',
      ]);
      if (problems.length > 0) {
        throw new IntentConflictError(
          `notification ${entry.key} was already claimed with different content (${problems.join('; ')})`,
        );
      }
      const row = await tx.one(
        sql<OutboxRow>`UPDATE notification_outbox SET attempts = attempts + 1 WHERE key = ${entry.key} RETURNING *`,
      );
      return toOutboxEntry(row!);
    }
    const row = await tx.one(sql<OutboxRow>`
      INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at)
      VALUES (${entry.key}, ${entry.orderId}, ${entry.kind}, ${entry.recipient}, ${entry.subject}, ${entry.messageId}, 'pending', 1, ${await this.stamp(tx)})
      RETURNING *`);
    return toOutboxEntry(row!);
  }

  async markNotificationSending(key: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const ours = await this.takeSending(tx, key);
      if (!ours) await requireOutbox(tx, key);
      return ours;
    });
  }

  /** pending → sending, stamped: the conditional update is the lock, of two attempts racing here exactly one changes the row. */
  private async takeSending(tx: Queryable, key: string): Promise<boolean> {
    const changed = await tx.run(
      sql`UPDATE notification_outbox SET status = 'sending', sending_since = ${await this.stamp(tx)} WHERE key = ${key} AND status = 'pending'`,
    );
    return changed === 1;
  }

  async takeOverNotification(
    key: string,
    since: string,
    rule: { endedAfterMs: number; notBefore?: string },
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      // Its age by the clock that stamped it, read in the transaction that re-stamps it: no host's clock decides.
      const at = await this.operations.clock(tx);
      if (at - Date.parse(since) < rule.endedAfterMs) return false;
      // A new stamp, never equal to the one taken over: what was judged of that hand-over never covers this one.
      const stamp = new Date(
        Math.max(at, Date.parse(since) + 1, rule.notBefore ? Date.parse(rule.notBefore) : 0),
      ).toISOString();
      return (
        (await tx.run(
          sql`UPDATE notification_outbox SET sending_since = ${stamp} WHERE key = ${key} AND status = 'sending' AND sending_since = ${since}`,
        )) === 1
      );
    });
  }

  async releaseNotification(key: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      return (
        (await tx.run(
          sql`UPDATE notification_outbox SET status = 'pending', sending_since = NULL WHERE key = ${key} AND status = 'sending'`,
        )) === 1
      );
    });
  }

  async markNotificationSent(
    key: string,
    providerResponse: string,
    audit?: { operationId: string; actor: string },
  ): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      // Only the first acceptance is recorded: a later one would hide when the customer was really mailed.
      // A pending entry is taken too: the acceptance is proof enough, whatever the row said.
      const sent = await tx.one(
        sql<OutboxRow>`UPDATE notification_outbox SET status = 'sent', provider_response = ${providerResponse}, sent_at = ${await this.stamp(tx)} WHERE key = ${key} AND status IN ('pending', 'sending') RETURNING *`,
      );
      const entry = sent ? toOutboxEntry(sent) : await requireOutbox(tx, key);
      if (sent && audit) {
        await this.operations.insertAudit(tx, audit.operationId, audit.actor, 'notification_sent', {
          key,
          kind: entry.kind,
          messageId: entry.messageId,
        });
      }
      return entry;
    });
  }

  async confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      // Where the server's answer would be, the person's word, so that no one takes it for the server's.
      const response = `delivery confirmed by ${confirmation.by}: ${confirmation.reason}`;
      const changes = await tx.run(
        sql`UPDATE notification_outbox SET status = 'sent', provider_response = ${response}, sent_at = ${new Date().toISOString()} WHERE key = ${key} AND status = 'sending'`,
      );
      const entry = await requireOutbox(tx, key);
      if (changes === 1) {
        const { by: confirmedBy, reason, operationId, actor } = confirmation;
        await this.operations.insertAudit(tx, operationId, actor, 'notification_sent', {
          key,
          kind: entry.kind,
          messageId: entry.messageId,
          confirmedBy,
          reason,
        });
      }
      return entry;
    });
  }

  async getNotification(key: string): Promise<OutboxEntry | undefined> {
    const row = await outboxRow(this.db, key);
    return row && toOutboxEntry(row);
  }

  /** The outbox's stamps, by the clock send stamps use (the database server's on PostgreSQL): hand-overs by different hosts compare. */
  private async stamp(tx: Queryable): Promise<string> {
    return new Date(await this.operations.clock(tx)).toISOString();
  }
}

function outboxRow(on: Queryable, key: string): Promise<OutboxRow | undefined> {
  return on.one(sql<OutboxRow>`SELECT * FROM notification_outbox WHERE key = ${key}`);
}

async function requireOutbox(on: Queryable, key: string): Promise<OutboxEntry> {
  const row = await outboxRow(on, key);
  if (!row) throw new Error(`no notification with key ${key} in the outbox`);
  return toOutboxEntry(row);
}
