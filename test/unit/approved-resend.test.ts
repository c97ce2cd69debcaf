// A person's retry approves resending a send only when its hand-over ended unknown, and names the hand-over they
// judged; a retry after any other failure (nothing sent, or another attempt still handing it over) approves nothing.
import type { Resumed } from '../../src/saga/workflow/desk';
import { approvedRetry, stepError } from '../../src/saga/workflow/step-failure';

const at = '2026-12-06T02:00:00.000Z';
const since = '2026-12-06T01:59:00.000Z';
const retry = (step: string) => ({ kind: 'retry-step', step, record: { at } }) as unknown as Resumed<string>;
const unknown = stepError('UNKNOWN_OUTCOME', 'may_have_executed', 'connection_lost', 'lost', {
  provider: { sendingSince: since },
});
const inProgress = stepError('STATE_CONFLICT', 'may_have_executed', 'send_in_progress', 'another attempt is sending', {
  provider: { sendingSince: since },
});

test('a retry of a send whose hand-over ended unknown approves its resend, naming the hand-over judged', () => {
  expect(approvedRetry(retry('send_receipt'), 'send_receipt', unknown)).toEqual({
    resendApprovedAt: at,
    approvedHandOver: since,
  });
});

test('a retry after a hand-over still in progress, or a failure that sent nothing, approves no resend', () => {
  expect(approvedRetry(retry('send_receipt'), 'send_receipt', inProgress)).toEqual({});
  const refused = stepError('PERMANENT_BUSINESS', 'not_executed', 'recipient_rejected', 'rejected');
  expect(approvedRetry(retry('send_receipt'), 'send_receipt', refused)).toEqual({});
});

test('no approval without a retry of that very step', () => {
  expect(approvedRetry(null, 'send_receipt', unknown)).toEqual({});
  expect(approvedRetry(retry('charge_card'), 'send_receipt', unknown)).toEqual({});
});
