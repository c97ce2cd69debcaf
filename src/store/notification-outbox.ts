// The notification outbox: one row per message key, claimed before the message is sent and moved
// pending → sending → sent by conditional updates, so of two attempts only one hands it over.
import { sql, type RawBuilder } from 'kysely';
import type { Database, Queryable } from './database';
import { requireSame } from './errors';
import { fromRow, type RowOf } from './rows';
import type { OperationLog } from './operation-log';
import type { DeliveryConfirmation, NewOutboxEntry, OutboxEntry } from './types';

export type OutboxRow = RowOf<Omit<OutboxEntry, 'sendingUntil'>> & {
  sending_until: string | null;
  sending_until_of: string | null;
};

export const toOutboxEntry = ({ sending_until, sending_until_of, ...row }: OutboxRow): OutboxEntry => ({
  ...fromRow(row),
  // A bound recorded with another stamp belongs to a hand-over that is no longer the current one.
  sendingUntil: sending_until_of !== null && sending_until_of === row.sending_since ? sending_until : null,
});

/** The outbox half of the OrderStore; each call is one transaction, its audit entry written in it. */
export class SqlNotificationOutbox {
  constructor(
    private readonly db: Database,
    private readonly operations: OperationLog,
  ) {}

  /** Records the intent to send (status pending) unless an entry for the key exists; returns the entry. */
  async claimNotification(entry: NewOutboxEntry): Promise<OutboxEntry> {
    return this.db.transaction((tx) => this.claimIn(tx, entry));
  }

  /** claimNotification, then markNotificationSending if pending, in one transaction; `stamp` is `ours`'s sendingSince. */
  async claimHandOver(
    entry: NewOutboxEntry,
    onWireForMs?: number,
  ): Promise<{ claimed: OutboxEntry; ours: boolean; stamp: string | null }> {
    return this.db.transaction(async (tx) => {
      const at = await this.operations.clock(tx);
      const stamp = new Date(at).toISOString();
      // A new entry is claimed and handed over in one write, inserted already sending: no one sees it pending between.
      const inserted = await this.insert(tx, entry, stamp, sql`'sending'`, stampValues(stamp, at, onWireForMs));
      if (inserted) {
        const claimed = {
          ...toOutboxEntry(inserted),
          status: 'pending' as const,
          sendingSince: null,
          sendingUntil: null,
        };
        return { claimed, ours: true, stamp };
      }
      const claimed = await this.claimExisting(tx, entry);
      const ours = claimed.status === 'pending' && (await this.takeSending(tx, entry.key, onWireForMs, at)) !== null;
      return { claimed, ours, stamp: ours ? stamp : null };
    });
  }

  private async claimIn(tx: Queryable, entry: NewOutboxEntry): Promise<OutboxEntry> {
    const inserted = await this.insert(tx, entry, await this.stamp(tx), sql`'pending'`, stampValues(null));
    return inserted ? toOutboxEntry(inserted) : this.claimExisting(tx, entry);
  }

  /**
   * The entry, inserted unless one is under its key (then undefined): the insert's probe is the existence check, and on
   * PostgreSQL it takes no predicate lock where a lookup that finds nothing would lock the index page concurrent claims
   * insert into.
   */
  private insert(tx: Queryable, entry: NewOutboxEntry, createdAt: string, status: RawBuilder<unknown>, s: StampValues) {
    return tx.one(sql<OutboxRow>`
      INSERT INTO notification_outbox (key, order_id, kind, recipient, subject, message_id, status, attempts, created_at, sending_since, sending_until, sending_until_of)
      VALUES (${entry.key}, ${entry.orderId}, ${entry.kind}, ${entry.recipient}, ${entry.subject}, ${entry.messageId}, ${status}, 1, ${createdAt}, ${s.since}, ${s.until}, ${s.of})
      ON CONFLICT (key) DO NOTHING
      RETURNING *`);
  }

  /** Another claim of an entry already there: the same content, or refused; the attempt counted. */
  private async claimExisting(tx: Queryable, entry: NewOutboxEntry): Promise<OutboxEntry> {
    requireSame(
      await requireOutbox(tx, entry.key),
      entry,
      ['orderId', 'kind', 'recipient', 'subject', 'messageId'],
      (differences) => `notification ${entry.key} was already claimed with different content (${differences})`,
    );
    const row = await tx.one(
      sql<OutboxRow>`UPDATE notification_outbox SET attempts = attempts + 1 WHERE key = ${entry.key} RETURNING *`,
    );
    return toOutboxEntry(row!);
  }

  /** pending → sending, stamped by the store's clock, on the wire until `onWireForMs` later; false when not pending. */
  async markNotificationSending(key: string, onWireForMs?: number): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const ours = (await this.takeSending(tx, key, onWireForMs)) !== null;
      if (!ours) await requireOutbox(tx, key);
      return ours;
    });
  }

  /** pending → sending, its stamp or null: the conditional update is the lock, of two racing attempts one wins. */
  private async takeSending(tx: Queryable, key: string, onWireForMs?: number, at?: number): Promise<string | null> {
    at ??= await this.operations.clock(tx);
    const stamp = new Date(at).toISOString();
    const changed = await tx.run(
      sql`UPDATE notification_outbox SET status = 'sending', ${stamped(stamp, at, onWireForMs)} WHERE key = ${key} AND status = 'pending'`,
    );
    return changed === 1 ? stamp : null;
  }

  /** Re-stamps a hand-over that ended unanswered, to resend it, if still `since` and `endedAfterMs` old; the stamp, or null. */
  async takeOverNotification(
    key: string,
    since: string,
    rule: { endedAfterMs: number; notBefore?: string; onWireForMs?: number },
  ): Promise<string | null> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      // Its age by the clock that stamped it, read in the transaction that re-stamps it: no host's clock decides.
      const at = await this.operations.clock(tx);
      if (at - Date.parse(since) < rule.endedAfterMs) return null;
      // A new stamp, never equal to the one taken over: what was judged of that hand-over never covers this one.
      const stampMs = Math.max(at, Date.parse(since) + 1, rule.notBefore ? Date.parse(rule.notBefore) : 0);
      const stamp = new Date(stampMs).toISOString();
      const changed = await tx.run(
        sql`UPDATE notification_outbox SET ${stamped(stamp, stampMs, rule.onWireForMs)} WHERE key = ${key} AND status = 'sending' AND sending_since = ${since}`,
      );
      return changed === 1 ? stamp : null;
    });
  }

  /** sending → pending once the server provably refused the message; with `since`, only while that hand-over is current. */
  async releaseNotification(key: string, since?: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await requireOutbox(tx, key);
      const ours = since === undefined ? sql`` : sql` AND sending_since = ${since}`;
      const changed = await tx.run(
        sql`UPDATE notification_outbox SET status = 'pending', ${stamped(null)} WHERE key = ${key} AND status = 'sending'${ours}`,
      );
      return changed === 1;
    });
  }

  /** Records the server's acceptance (sending → sent); with `audit`, the first acceptance is in the operation's audit trail. */
  async markNotificationSent(
    key: string,
    providerResponse: string,
    audit?: { operationId: string; actor: string },
  ): Promise<OutboxEntry> {
    // Only the first acceptance is recorded: a later one would hide when the customer was really mailed.
    // A pending entry is taken too: the acceptance is proof enough, whatever the row said.
    return this.sent(key, providerResponse, sql`status IN ('pending', 'sending')`, audit);
  }

  /** A person's word that a message whose hand-over is unknown was delivered: sent, if still on the hand-over judged. */
  async confirmNotificationDelivered(key: string, confirmation: DeliveryConfirmation): Promise<OutboxEntry> {
    const { by: confirmedBy, reason, operationId, actor, sendingSince } = confirmation;
    // Where the server's answer would be, the person's word, so that no one takes it for the server's.
    const response = `delivery confirmed by ${confirmedBy}: ${reason}`;
    // Only the hand-over the person's word covers: one taken over since (an approved resend in flight) is not.
    const covered = sql`status = 'sending' AND sending_since = ${sendingSince}`;
    return this.sent(key, response, covered, { operationId, actor, detail: { confirmedBy, reason } });
  }

  /** In one transaction, moves the entry to sent where `only` holds, audited with `audit` when it moved; the entry as it stands. */
  private sent(
    key: string,
    response: string,
    only: RawBuilder<unknown>,
    audit?: { operationId: string; actor: string; detail?: Record<string, unknown> },
  ): Promise<OutboxEntry> {
    return this.db.transaction(async (tx) => {
      const sent = await tx.one(
        sql<OutboxRow>`UPDATE notification_outbox SET status = 'sent', provider_response = ${response}, sent_at = ${await this.stamp(tx)} WHERE key = ${key} AND ${only} RETURNING *`,
      );
      const entry = sent ? toOutboxEntry(sent) : await requireOutbox(tx, key);
      if (sent && audit) {
        const detail = { key, kind: entry.kind, messageId: entry.messageId, ...audit.detail };
        await this.operations.audit(audit.operationId, audit.actor, 'notification_sent', detail, tx);
      }
      return entry;
    });
  }

  getNotification(key: string): Promise<OutboxEntry | undefined> {
    return findOutbox(this.db, key);
  }

  /** The outbox's stamps, by the clock send stamps use (the database server's on PostgreSQL): hand-overs by different hosts compare. */
  private async stamp(tx: Queryable): Promise<string> {
    return new Date(await this.operations.clock(tx)).toISOString();
  }
}

type StampValues = { since: string | null; until: string | null; of: string | null };

/** A hand-over's stamp: when it began and, if its sender gave one, its bound (null clears them). */
function stampValues(stamp: string | null, at = 0, onWireForMs?: number): StampValues {
  const until = stamp === null || onWireForMs === undefined ? null : new Date(at + onWireForMs).toISOString();
  return { since: stamp, until, of: until === null ? null : stamp };
}

/** The columns a hand-over's stamp sets. */
function stamped(stamp: string | null, at = 0, onWireForMs?: number) {
  const s = stampValues(stamp, at, onWireForMs);
  return sql`sending_since = ${s.since}, sending_until = ${s.until}, sending_until_of = ${s.of}`;
}

async function findOutbox(on: Queryable, key: string): Promise<OutboxEntry | undefined> {
  const row = await on.one(sql<OutboxRow>`SELECT * FROM notification_outbox WHERE key = ${key}`);
  return row && toOutboxEntry(row);
}

async function requireOutbox(on: Queryable, key: string): Promise<OutboxEntry> {
  const entry = await findOutbox(on, key);
  if (!entry) throw new Error(`no notification with key ${key} in the outbox`);
  return entry;
}
