import { refundProblem } from '../../src/workflows/refund';
import { compensationKey, stepKey } from '../../src/reliability/keys';
import { InvalidRefundRequestError, parseRefundRequest, refundWorkflowId, type Order } from '../../src/shared';

const valid = { orderId: 'ord_1', amount: 1250, currency: 'usd', requestedBy: 'alice' };

describe('parseRefundRequest', () => {
  it('fills defaults for a valid request', () => {
    expect(parseRefundRequest(valid)).toEqual({ ...valid, reason: 'requested_by_customer', operationVersion: 1 });
  });

  it.each([
    [{ ...valid, orderId: '' }, 'orderId'],
    [{ ...valid, orderId: 'has space' }, 'orderId'],
    [{ ...valid, amount: 0 }, 'amount: must be greater than 0'],
    [{ ...valid, amount: -5 }, 'amount'],
    [{ ...valid, amount: 12.5 }, 'amount: must be a whole number'],
    [{ ...valid, amount: '1250' }, 'amount'],
    [{ ...valid, currency: 'USD' }, 'currency'],
    [{ ...valid, currency: 'dollars' }, 'currency'],
    [{ ...valid, reason: 'because' }, 'reason'],
    [{ ...valid, requestedBy: '  ' }, 'requestedBy'],
    [{ ...valid, operationVersion: 0 }, 'operationVersion'],
    [{ ...valid, extra: true }, 'extra'],
    [{ amount: 1 }, 'orderId'],
  ])('rejects %j naming the field', (input, field) => {
    expect(() => parseRefundRequest(input)).toThrow(InvalidRefundRequestError);
    expect(() => parseRefundRequest(input)).toThrow(field);
  });

  it.each([null, undefined, 'ord_1', 42, []])('rejects a request that is not an object: %j', (input) => {
    expect(() => parseRefundRequest(input)).toThrow(/invalid refund request/);
  });
});

describe('operation identity', () => {
  it('derives the workflow id from the order and operation version', () => {
    expect(refundWorkflowId('ord_1', 1)).toBe('refund-ord_1-v1');
    expect(refundWorkflowId('ord_1', 2)).not.toBe(refundWorkflowId('ord_1', 1));
  });

  it('derives stable, distinct keys per step and for compensations', () => {
    const key = stepKey('refund-ord_1-v1', 'create_refund', 1);
    expect(key).toBe(stepKey('refund-ord_1-v1', 'create_refund', 1));
    expect(key).not.toBe(stepKey('refund-ord_1-v1', 'notify_customer', 1));
    expect(key).not.toBe(stepKey('refund-ord_1-v2', 'create_refund', 2));
    expect(compensationKey(key)).not.toBe(key);
  });
});

describe('refundProblem', () => {
  const order: Order = {
    id: 'ord_1',
    paymentIntentId: 'pi_1',
    customerEmail: 'c@example.test',
    currency: 'usd',
    amount: 5000,
    refundedAmount: 1000,
    status: 'partially_refunded',
    version: 2,
  };
  const request = parseRefundRequest(valid);

  it('accepts a refund within what is still refundable', () => {
    expect(refundProblem(order, { ...request, amount: 4000 })).toBeUndefined();
  });
  it('refuses more than is still refundable', () => {
    expect(refundProblem(order, { ...request, amount: 4001 })).toMatch(/exceeds the 4000 still refundable/);
  });
  it('refuses another currency', () => {
    expect(refundProblem(order, { ...request, currency: 'eur' })).toMatch(/paid in usd/);
  });
});
