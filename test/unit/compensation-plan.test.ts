// The one compensation plan: what the store shows standing decides what is undone, for the run,
// a decision, a cancellation and the follow-up alike.
import { compensationPlan, correctsUnknownNotice } from '../../src/compensations/plan';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import type { RecoveryPolicy } from '../../src/reliability/policy';

const op = 'refund:test:ord_1:v1';
const order = { refundId: 're_1', amount: 500, revertedByKey: null };
const notice = (status: string) => ({
  key: `${op}:notify_customer`,
  status,
  messageId: '<refund.test.ord_1.v1.notify_customer@durable-refunds.local>',
});

test("what stands is undone under the saga's keys, the email before the order", () => {
  expect(compensationPlan(op, { order, notice: notice('sent') }, false)).toEqual({
    undo: [
      { step: 'notify_customer', key: `${op}:notify_customer:compensate` },
      { step: 'update_order', key: `${op}:update_order:compensate` },
    ],
    held: null,
  });
});

test('a notice never handed over told the customer nothing; nothing stands, nothing is undone', () => {
  expect(compensationPlan(op, { order, notice: notice('pending') }, false)).toEqual({
    undo: [{ step: 'update_order', key: `${op}:update_order:compensate` }],
    held: null,
  });
  expect(compensationPlan(op, { order: null, notice: null }, false)).toEqual({ undo: [], held: null });
});

test('a notice whose hand-over is unknown is held for a person with its Message-ID, or corrected when allowed', () => {
  const held = compensationPlan(op, { order, notice: notice('sending') }, false);
  expect(held.undo).toEqual([{ step: 'update_order', key: `${op}:update_order:compensate` }]);
  expect(held.held).toMatchObject({
    step: 'notify_customer',
    key: `${op}:notify_customer:compensate`,
    reason: expect.stringContaining(notice('sending').messageId),
  });
  expect(compensationPlan(op, { order, notice: notice('sending') }, true)).toMatchObject({
    undo: [{ step: 'notify_customer' }, { step: 'update_order' }],
    held: null,
  });
});

test("an unknown hand-over is corrected without asking only under a policy that resends them, or on a person's decision", () => {
  expect(correctsUnknownNotice(DEFAULT_POLICY, false)).toBe(false);
  expect(correctsUnknownNotice(DEFAULT_POLICY, true)).toBe(true);
  const resends: RecoveryPolicy = {
    ...DEFAULT_POLICY,
    rules: [
      {
        code: 'UNKNOWN_OUTCOME',
        certainty: '*',
        boundary: 'smtp',
        action: 'retry',
        owner: 'dependency_adapter',
        maxAttempts: 2,
        jitter: 0,
      },
      ...DEFAULT_POLICY.rules,
    ],
  };
  expect(correctsUnknownNotice(resends, false)).toBe(true);
});

test("a correction already begun is never held: its key replays it, whatever the notice's hand-over", () => {
  const correction = (status: string) => ({
    key: `${op}:notify_customer:compensate`,
    status,
    messageId: '<refund.test.ord_1.v1.notify_customer.compensate@durable-refunds.local>',
  });
  for (const status of ['sending', 'sent']) {
    expect(compensationPlan(op, { order, notice: notice('sending'), correction: correction(status) }, false)).toEqual({
      undo: [
        { step: 'notify_customer', key: `${op}:notify_customer:compensate` },
        { step: 'update_order', key: `${op}:update_order:compensate` },
      ],
      held: null,
    });
  }
});

test('a held notice says what a person does when it is in the mailbox, as the caller offers it', () => {
  expect(compensationPlan(op, { order, notice: notice('sending') }, false).held!.reason).toContain(
    'if it is there, compensate sends the correction',
  );
  expect(
    compensationPlan(op, { order, notice: notice('sending') }, false, 'a person sends the correction').held!.reason,
  ).toContain('if it is there, a person sends the correction;');
});
