// The send decision, pure: replay a receipt on record; reconcile first when an earlier send is open and a send now
// would fall outside the key's dedupe window; send otherwise.
import { sendDecision, type SendRecord } from '../../src/saga/send';

const fresh: SendRecord<string> = { receipt: null, requestsSent: 0, provenAbsentThrough: null, lastSentAt: null };
const sentOnce = { ...fresh, requestsSent: 1, lastSentAt: '2026-12-05T08:00:00.000Z' };

test('a receipt on record is replayed, inside the window or not', () => {
  for (const inside of [true, false])
    expect(sendDecision({ ...sentOnce, receipt: 're_1' }, inside)).toEqual({ kind: 'replay', receipt: 're_1' });
});

test('nothing sent yet: send, whatever the window says', () => {
  expect(sendDecision(fresh, false)).toEqual({ kind: 'send' });
});

test('an earlier send open: inside the dedupe window the provider answers a resend with the first result, outside it never goes blind', () => {
  expect(sendDecision(sentOnce, true)).toEqual({ kind: 'send' });
  expect(sendDecision(sentOnce, false)).toEqual({ kind: 'reconcile_first' });
});

test('every earlier send proven to have made nothing: send, even outside the window; one not proven keeps it closed', () => {
  expect(sendDecision({ ...sentOnce, provenAbsentThrough: 1 }, false)).toEqual({ kind: 'send' });
  expect(sendDecision({ ...sentOnce, requestsSent: 2, provenAbsentThrough: 1 }, false)).toEqual({
    kind: 'reconcile_first',
  });
});
