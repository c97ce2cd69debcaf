// The send decision, pure: replay a receipt on record; reconcile first when an earlier send is open and a send now
// would fall outside the key's dedupe window; send otherwise. And sendOnce, which only acts on it.
import { Classified, type Attempt } from '../../src/activities/attempt';
import { SEND_CLOCK_MARGIN_MS } from '../../src/activities/request-deadline';
import { outsideDedupeWindow, sendDecision, sendOnce, type KeyedSend, type SendRecord } from '../../src/saga/send';

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

describe('sendOnce acts on the decision, with the attempt it is handed (no provider, no activity context)', () => {
  const attempt = (): Attempt => ({ actor: 'wf', startedAtMs: Date.now(), requests: 0, providerRequestId: null });
  const calls: string[] = [];
  const send = (
    record: SendRecord<string>,
    request: () => Promise<string>,
  ): KeyedSend<SendRecord<string>, string, string> => ({
    record,
    insideWindow: async () => false,
    replayed: (receipt) => `${receipt} (replayed)`,
    reconcileFirst: () => outsideDedupeWindow('sent before', 'k'),
    maxRequestMs: 5000,
    stamp: async (onWireForMs) => void calls.push(`stamp ${onWireForMs}`),
    request: (timeoutMs) => (calls.push(`request ${timeoutMs <= 5000}`), request()),
    classify: (err) => new Classified('TRANSIENT_DEPENDENCY', 'not_executed', 'refused', (err as Error).message),
    provesNothingSent: () => true,
    recordUnknown: async () => calls.push('unknown'),
    recordAbsent: async (_f, through) => calls.push(`absent through ${through}`),
    receiptOf: (raw) => raw,
    recordReceipt: async (_raw, receipt) => calls.push(`receipt ${receipt}`),
    notRecorded: () => new Classified('STATE_CONFLICT', 'completed', 'receipt_not_recorded', 'lost'),
  });
  beforeEach(() => (calls.length = 0));

  test('a receipt on record is replayed: nothing stamped, nothing sent', async () => {
    await expect(
      sendOnce(
        attempt(),
        send({ ...sentOnce, receipt: 're_1' }, async () => 're_2'),
      ),
    ).resolves.toBe('re_1 (replayed)');
    expect(calls).toEqual([]);
  });

  test('refused outside the window: the failure says reconcile first, and nothing is stamped or sent', async () => {
    await expect(
      sendOnce(
        attempt(),
        send(sentOnce, async () => 're_2'),
      ),
    ).rejects.toMatchObject({
      reason: 'outside_dedupe_window',
    });
    expect(calls).toEqual([]);
  });

  test("sent: stamped with its bound, then the request within the attempt's deadline, then the receipt", async () => {
    const a = attempt();
    await expect(
      sendOnce(
        a,
        send(fresh, async () => 're_3'),
      ),
    ).resolves.toBe('re_3');
    expect(calls).toEqual([`stamp ${5000 + SEND_CLOCK_MARGIN_MS}`, 'request true', 'receipt re_3']);
    expect(a.sendBy).toBeGreaterThan(Date.now());
  });

  test('a refusal that proves nothing was sent is recorded as the next send proven absent', async () => {
    const refused = send(fresh, async () => Promise.reject(new Error('402')));
    await expect(sendOnce(attempt(), refused)).rejects.toMatchObject({ reason: 'refused' });
    expect(calls).toEqual([`stamp ${5000 + SEND_CLOCK_MARGIN_MS}`, 'request true', 'absent through 1']);
  });
});
