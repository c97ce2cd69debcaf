import { refundProblem, requestHash } from '../../src/activities/operations';
import { compensationKey, operationId, refundWorkflowId, stepKey } from '../../src/contract';
import { InvalidRefundRequestError, parseRefundRequest } from '../../src/domain/refund-request';
import type { Order } from '../../src/domain/order';

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

  it('takes a currency in any case', () => {
    expect(parseRefundRequest({ ...valid, currency: ' EUR ' }).currency).toBe('eur');
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

  it('derives the operation id from the business intent: scope, order and version, never the workflow id', () => {
    expect(operationId('local', 'ord_1', 1)).toBe('refund:local:ord_1:v1');
    expect(operationId('staging', 'ord_1', 1)).not.toBe(operationId('production', 'ord_1', 1));
    expect(operationId('local', 'ord_1', 2)).not.toBe(operationId('local', 'ord_1', 1));
  });

  it('derives stable, distinct keys per step and for compensations', () => {
    const op = operationId('local', 'ord_1', 1);
    const key = stepKey(op, 'create_refund');
    expect(key).toBe('refund:local:ord_1:v1:create_refund');
    expect(key).not.toBe(stepKey(op, 'notify_customer'));
    expect(key).not.toBe(stepKey(operationId('local', 'ord_1', 2), 'create_refund'));
    expect(compensationKey(key)).not.toBe(key);
  });

  it('hashes what the operation asks for, not who asked or in which order the fields came', () => {
    const request = parseRefundRequest(valid);
    expect(requestHash(request)).toMatch(/^[0-9a-f]{64}$/);
    expect(requestHash({ ...request, requestedBy: 'bob' } as typeof request)).toBe(requestHash(request));
    expect(requestHash({ reason: request.reason, currency: 'usd', amount: 1250, orderId: 'ord_1' })).toBe(
      requestHash(request),
    );
    expect(requestHash({ ...request, amount: 1251 })).not.toBe(requestHash(request));
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
    expect(refundProblem(order, { ...request, amount: 4000 })).toBeNull();
  });
  it('refuses more than is still refundable', () => {
    expect(refundProblem(order, { ...request, amount: 4001 })).toMatch(/exceeds the 4000 still refundable/);
  });
  it('refuses another currency', () => {
    expect(refundProblem(order, { ...request, currency: 'eur' })).toMatch(/paid in usd/);
  });
});
