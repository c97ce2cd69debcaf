// The orders and the refunds applied to them: each refund is recorded by its operation id, so
// applying or reverting it twice changes the order once; every write is at the version read.
import { sql } from 'kysely';
import type { Order, OrderStatus } from '../domain/order';
import type { OrderReceipt } from '../contract';
import type { Database, Queryable } from './database';
import {
  IntentConflictError,
  InvalidOperationError,
  OrderNotFoundError,
  RefundExceedsOrderError,
  requireMinorUnits,
  requireSame,
  VersionConflictError,
} from './errors';
import type { OperationLog } from './operation-log';
import { fromRow, type RowOf } from './rows';
import type { AppliedRefund, ApplyRefundInput, NewOrder, RevertRefundInput } from './types';

/** Runs inside an order write's transaction, after reading the order and before the transaction's first write. */
export type BeforeOrderWrite = (orderId: string, tx: Queryable) => Promise<void>;

type OrderRow = RowOf<Order> & { updated_at: string };

type RefundRow = RowOf<
  AppliedRefund & { priorRefundedAmount: number; priorStatus: OrderStatus; appliedVersion: number }
>;

const toOrder = ({ updated_at: _, ...row }: OrderRow): Order => fromRow(row);

const receipt = (order: Order, changed: boolean): OrderReceipt => {
  const { id: orderId, status, refundedAmount, version } = order;
  return { orderId, status, refundedAmount, version, changed };
};

/** What an order write's audit entry says of the order after it. */
const totals = ({ refundedAmount, version }: Order) => ({ refundedAmount, version });

function statusFor(refundedAmount: number, amount: number): OrderStatus {
  if (refundedAmount === 0) return 'paid';
  return refundedAmount < amount ? 'partially_refunded' : 'refunded';
}

/** The order half of the OrderStore; each call is one transaction, its audit entry written in it. */
export class SqlOrders {
  constructor(
    private readonly db: Database,
    private readonly operations: OperationLog,
    private readonly beforeOrderWrite: BeforeOrderWrite,
  ) {}

  /** Inserts the order, or returns the existing one when an identical order is already there. */
  async seedOrder(order: NewOrder): Promise<Order> {
    requireMinorUnits('order amount', order.amount);
    return this.db.transaction(async (tx) => {
      const existing = await findOrder(tx, order.id);
      if (existing) {
        requireSame(
          existing,
          order,
          ['paymentIntentId', 'customerEmail', 'currency', 'amount'],
          (differences) =>
            `order ${order.id} already exists with different fields (${differences}); it was not overwritten`,
        );
        return existing;
      }
      await tx.run(sql`
        INSERT INTO orders (id, payment_intent_id, customer_email, currency, amount, refunded_amount, status, version, updated_at)
        VALUES (${order.id}, ${order.paymentIntentId}, ${order.customerEmail}, ${order.currency}, ${order.amount}, 0, 'paid', 1, ${now()})`);
      return requireOrder(tx, order.id);
    });
  }

  getOrder(id: string): Promise<Order | undefined> {
    return findOrder(this.db, id);
  }

  /** Idempotent by operation id; optimistic on the order's version. */
  async applyRefund(input: ApplyRefundInput): Promise<OrderReceipt> {
    requireMinorUnits('refund amount', input.amount);
    return this.optimistic((tx, read) => this.apply(tx, read, input, this.beforeOrderWrite));
  }

  /**
   * The same, inside a caller's transaction (the refund's receipt carries it): what the order refuses is thrown for the
   * caller to undo. Only the order step's own transaction meets the store's fault seam.
   */
  applyRefundIn(tx: Queryable, input: ApplyRefundInput): Promise<OrderReceipt> {
    requireMinorUnits('refund amount', input.amount);
    return this.apply(tx, (id) => findOrder(tx, id), input);
  }

  private async apply(
    tx: Queryable,
    read: (id: string) => Promise<Order | undefined>,
    input: ApplyRefundInput,
    beforeWrite?: BeforeOrderWrite,
  ): Promise<OrderReceipt> {
    const order = await read(input.orderId);
    // Before the claim: on SQLite the seam's other connection (store faults) could not write after it.
    if (order) await beforeWrite?.(order.id, tx);
    // Claimed by inserting, not by looking first: a lookup that finds nothing locks the index page where the
    // row would go (PostgreSQL), where every concurrent refund inserts its own, and SERIALIZABLE aborts them.
    const claimed =
      order &&
      (await tx.one(sql`
          INSERT INTO order_refunds (operation_id, order_id, refund_id, amount, prior_refunded_amount, prior_status, applied_version, applied_at)
          VALUES (${input.operationId}, ${order.id}, ${input.refundId}, ${input.amount}, ${order.refundedAmount}, ${order.status}, ${order.version + 1}, ${now()})
          ON CONFLICT (operation_id) DO NOTHING
          RETURNING operation_id`));
    if (!claimed) {
      const applied = await refundRow(tx, input.operationId);
      if (!applied) throw new OrderNotFoundError(`order ${input.orderId} does not exist`);
      requireSame(
        { orderId: applied.order_id, refundId: applied.refund_id, amount: applied.amount },
        input,
        ['orderId', 'refundId', 'amount'],
        (differences) =>
          `operation ${input.operationId} was already applied with different parameters (${differences})`,
      );
      return receipt(await requireOrder(tx, input.orderId), false);
    }
    const refunded = order.refundedAmount + input.amount;
    // Thrown, the claim above is rolled back with the rest.
    if (refunded > order.amount) {
      throw new RefundExceedsOrderError(
        `refund of ${input.amount} ${order.currency} for order ${order.id} exceeds what is left to refund ` +
          `(${order.amount - order.refundedAmount} of ${order.amount}); nothing was changed`,
      );
    }
    const updated = await this.updateOrder(tx, order, refunded);
    const detail = { refundId: input.refundId, amount: input.amount, ...totals(updated) };
    await this.operations.audit(input.operationId, input.actor ?? 'unknown', 'order_updated', detail, tx);
    return receipt(updated, true);
  }

  /** Restores the state the order had before `operationId`, idempotent by compensation key. */
  async revertRefund(input: RevertRefundInput): Promise<OrderReceipt> {
    return this.optimistic(async (tx, read) => {
      const applied = await refundRow(tx, input.operationId);
      if (!applied || applied.order_id !== input.orderId) {
        throw new InvalidOperationError(
          `operation ${input.operationId} was never applied to order ${input.orderId}, so there is nothing to revert`,
        );
      }
      const other = await tx.one(sql<{ operation_id: string }>`
        SELECT operation_id FROM order_refunds WHERE reverted_by_key = ${input.compensationKey}`);
      if (other && other.operation_id !== input.operationId) {
        throw new IntentConflictError(
          `compensation key ${input.compensationKey} already reverted operation ${other.operation_id}, not ${input.operationId}`,
        );
      }
      // Already reverted (by this key or another): reverting twice would take the money off twice.
      if (applied.reverted_by_key !== null) return receipt(await requireOrder(tx, input.orderId), false);

      const order = found(await read(input.orderId), input.orderId);
      // A later write moved the order on: take only this operation's amount off instead of clobbering it with the old snapshot.
      const untouched = order.version === applied.applied_version;
      const refunded = untouched ? applied.prior_refunded_amount : order.refundedAmount - applied.amount;
      if (refunded < 0) {
        throw new InvalidOperationError(
          `reverting operation ${input.operationId} would leave order ${order.id} with a negative refunded amount`,
        );
      }
      const status = untouched ? applied.prior_status : statusFor(refunded, order.amount);
      await this.beforeOrderWrite(order.id, tx);
      const updated = await this.updateOrder(tx, order, refunded, status);
      await tx.run(
        sql`UPDATE order_refunds SET reverted_by_key = ${input.compensationKey}, reverted_at = ${now()} WHERE operation_id = ${input.operationId}`,
      );
      const detail = { compensationKey: input.compensationKey, ...totals(updated) };
      await this.operations.audit(input.operationId, input.actor ?? 'unknown', 'order_reverted', detail, tx);
      return receipt(updated, true);
    });
  }

  /** The order's record of an operation's refund, if it was applied. */
  async appliedRefund(operationId: string): Promise<AppliedRefund | undefined> {
    const row = await this.db.one(sql<RowOf<AppliedRefund>>`
      SELECT operation_id, order_id, refund_id, amount, reverted_by_key FROM order_refunds WHERE operation_id = ${operationId}`);
    return row && fromRow(row);
  }

  /**
   * `fn` as an optimistic transaction on the order it reads by `read`: after a serialization failure, a version moved
   * since is another writer's (VersionConflictError), an unmoved one an overlap of predicate locks (`fn` runs again).
   */
  private optimistic<T>(fn: (tx: Queryable, read: (id: string) => Promise<Order | undefined>) => Promise<T>) {
    let read: Order | undefined;
    const moved = async (failure: unknown) => {
      const was = read;
      read = undefined;
      if (!was || (await findOrder(this.db, was.id))?.version === was.version) return undefined;
      return new VersionConflictError(
        `another writer changed the order ${was.id} after it was read at version ${was.version}; reload and try again`,
        { cause: failure },
      );
    };
    return this.db.transaction((tx) => fn(tx, async (id) => (read = await findOrder(tx, id))), { moved });
  }

  private async updateOrder(
    tx: Queryable,
    order: Order,
    refundedAmount: number,
    status = statusFor(refundedAmount, order.amount),
  ): Promise<Order> {
    const changed = await tx.run(
      sql`UPDATE orders SET refunded_amount = ${refundedAmount}, status = ${status}, version = version + 1, updated_at = ${now()} WHERE id = ${order.id} AND version = ${order.version}`,
    );
    if (changed === 0) {
      throw new VersionConflictError(
        `order ${order.id} changed after it was read at version ${order.version}; reload and try again`,
      );
    }
    return { ...order, refundedAmount, status, version: order.version + 1 };
  }
}

async function findOrder(on: Queryable, id: string): Promise<Order | undefined> {
  const row = await on.one(sql<OrderRow>`SELECT * FROM orders WHERE id = ${id}`);
  return row && toOrder(row);
}

function found(order: Order | undefined, id: string): Order {
  if (!order) throw new OrderNotFoundError(`order ${id} does not exist`);
  return order;
}

const requireOrder = async (on: Queryable, id: string) => found(await findOrder(on, id), id);

function refundRow(on: Queryable, operationId: string): Promise<RefundRow | undefined> {
  return on.one(sql<RefundRow>`SELECT * FROM order_refunds WHERE operation_id = ${operationId}`);
}

const now = () => new Date().toISOString();
