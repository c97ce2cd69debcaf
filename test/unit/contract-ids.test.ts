// Every id and key of the contract: its builder and its parser agree, and the parser refuses
// what another builder made, so no caller needs a regex of its own.
import { createHash } from 'node:crypto';
import {
  compensationKey,
  decisionUpdateId,
  followUpWorkflowId,
  lookupKey,
  LOOKUPS,
  messageIdForKey,
  operationId,
  parseCompensationKey,
  parseDecisionUpdateId,
  parseFollowUpWorkflowId,
  parseLookupKey,
  parseMessageId,
  parseOperationId,
  parseRefundWorkflowId,
  parseStepKey,
  parseSweepUpdateId,
  refundWorkflowId,
  stepKey,
  sweepUpdateId,
  type RefundRunState,
} from '../../src/contract';
import { sha256Hex } from '../../src/contract/sha256';

const orders = ['ord_1', 'A', 'ord-v3', 'x-y_z-9'];
const op = operationId('local', 'ord_1', 1);

test('refund workflow ids round-trip, an order id ending in -v<n> too', () => {
  for (const orderId of orders) {
    for (const operationVersion of [1, 2, 17])
      expect(parseRefundWorkflowId(refundWorkflowId(orderId, operationVersion))).toEqual({ orderId, operationVersion });
  }
  expect(refundWorkflowId('ord_1', 1)).toBe('refund-ord_1-v1');
  for (const other of ['refund-ord_1', 'refund-ord_1-v1-again', followUpWorkflowId(op), 'my-run-v1', op])
    expect(parseRefundWorkflowId(other)).toBeUndefined();
});

test('operation ids round-trip', () => {
  for (const orderId of orders)
    expect(parseOperationId(operationId('staging', orderId, 4))).toEqual({
      scope: 'staging',
      orderId,
      operationVersion: 4,
    });
  expect(op).toBe('refund:local:ord_1:v1');
  for (const other of [refundWorkflowId('ord_1', 1), stepKey(op, 'create_refund'), 'refund:local:ord_1'])
    expect(parseOperationId(other)).toBeUndefined();
});

test('step keys and compensation keys round-trip, and neither parses as the other', () => {
  for (const step of ['load_order', 'create_refund', 'update_order', 'notify_customer', 'run_stopped']) {
    const key = stepKey(op, step);
    expect(parseStepKey(key)).toEqual({ operationId: op, step });
    expect(parseCompensationKey(compensationKey(key))).toEqual({ forwardKey: key });
    expect(parseStepKey(compensationKey(key))).toBeUndefined();
    expect(parseCompensationKey(key)).toBeUndefined();
  }
  // update_order's forward key is the operation id itself.
  expect(parseCompensationKey(compensationKey(op))).toEqual({ forwardKey: op });
  expect(compensationKey(stepKey(op, 'notify_customer'))).toBe('refund:local:ord_1:v1:notify_customer:compensate');
  expect(parseStepKey(op)).toBeUndefined();
});

test('lookup keys round-trip', () => {
  for (const lookup of LOOKUPS)
    expect(parseLookupKey(lookupKey(stepKey(op, 'create_refund'), lookup))).toEqual({
      forwardKey: stepKey(op, 'create_refund'),
      lookup,
    });
  expect(lookupKey(stepKey(op, 'create_refund'), 'reconcile')).toBe('refund:local:ord_1:v1:create_refund#reconcile');
  expect(parseLookupKey(stepKey(op, 'create_refund'))).toBeUndefined();
  expect(parseLookupKey(`${op}#other`)).toBeUndefined();
});

test('Message-IDs: a readable key reads back; any other key is hashed (SHA-256, as node:crypto computes it)', () => {
  for (const key of [
    stepKey(op, 'notify_customer'),
    compensationKey(stepKey(op, 'notify_customer')),
    'refund-ord_1-v1:notify_customer:v1',
  ]) {
    expect(parseMessageId(messageIdForKey(key))).toEqual({ key });
  }
  expect(messageIdForKey('refund-ord_1-v1:notify_customer:v1')).toBe(
    '<refund-ord_1-v1.notify_customer.v1@durable-refunds.local>',
  );
  const odd = 'a b/c';
  expect(messageIdForKey(odd)).toBe(
    `<a-b-c=${createHash('sha256').update(odd).digest('hex').slice(0, 16)}@durable-refunds.local>`,
  );
  expect(parseMessageId(messageIdForKey(odd))).toEqual({ hashed: 'a-b-c' });
  expect(parseMessageId('<x@example.test>')).toBeUndefined();
  for (const text of ['', 'abc', 'x'.repeat(55), 'y'.repeat(56), 'z'.repeat(64), 'é✓'.repeat(100)]) {
    expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
  }
});

test('follow-up workflow ids round-trip', () => {
  expect(followUpWorkflowId(op)).toBe('follow-up:refund:local:ord_1:v1');
  expect(parseFollowUpWorkflowId(followUpWorkflowId(op))).toEqual({ operationId: op });
  for (const other of [refundWorkflowId('ord_1', 1), op, 'follow-up:'])
    expect(parseFollowUpWorkflowId(other)).toBeUndefined();
});

test("decide Update ids: the sweep's per occurrence, a person's per parking", () => {
  expect(parseSweepUpdateId(sweepUpdateId('sweep-2026-01-01T00:00'))).toEqual({
    occurrenceId: 'sweep-2026-01-01T00:00',
  });
  const state = { decisions: [], parked: { since: '2026-01-01T00:00:00.000Z' } } as unknown as Pick<
    RefundRunState,
    'decisions' | 'parked'
  >;
  const retry = decisionUpdateId({ decision: 'retry-step', by: 'alice', reason: 'x', step: 'create_refund' }, state);
  expect(retry).toBe('retry-step:create_refund:parked-2026-01-01T00:00:00.000Z:after-0');
  expect(parseDecisionUpdateId(retry)).toEqual({ decision: 'retry-step', step: 'create_refund' });
  expect(parseDecisionUpdateId(decisionUpdateId({ decision: 'compensate', by: 'alice', reason: 'x' }, state))).toEqual({
    decision: 'compensate',
  });
  const approve = decisionUpdateId({ decision: 'approve', by: 'bob', reason: 'x' }, state);
  expect(approve).toBe('approve:proposal-none');
  expect(parseDecisionUpdateId(approve)).toEqual({ decision: 'approve' });
  expect(parseDecisionUpdateId(sweepUpdateId('o1'))).toBeUndefined();
  const reconcile = decisionUpdateId({ decision: 'reconcile', by: 'alice', reason: 'x' }, state);
  expect(parseSweepUpdateId(reconcile)).toBeUndefined();
  expect(parseDecisionUpdateId(reconcile)).toEqual({ decision: 'reconcile' });
});
