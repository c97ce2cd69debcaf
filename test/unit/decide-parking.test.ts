// Which parking `npm run decide` answers, without a terminal or a server: the address given is the one
// sent or the decision is refused with where the run is now; --current says which it answers; at a
// terminal the person is shown the verdict and asked; a script that names none is refused first.
import { PassThrough } from 'node:stream';
import {
  answeredAddress,
  confirm,
  NotConfirmed,
  Refused,
  unnamedParking,
  type ParkingIO,
} from '../../src/cli/decide-parking';
import { decisionAddress, type RefundRunState } from '../../src/contract';

const WF = 'refund-ord_1-v1';
/** A run parked at notify_customer, as much of its state as decide reads. */
const parkedAt = (since: string, decisions = 0) =>
  ({
    runId: 'r1',
    status: 'needs_attention',
    request: { orderId: 'ord_1', operationVersion: 1 },
    outcome: { reason: 'the notice bounced' },
    parked: {
      since,
      failedStep: 'notify_customer',
      verdict: 'stop and hand to a person',
      nextAction: 'look for the notice in the mailbox',
      decision: 'retry-step:notify_customer',
      decidedBy: ['ops'],
      approvedBy: [],
    },
    decisions: Array.from({ length: decisions }, () => ({ outcome: 'rejected' })),
    steps: [],
  }) as unknown as RefundRunState;
const READ = parkedAt('2026-01-01T00:00:00.000Z');
const NOW = parkedAt('2026-01-01T00:05:00.000Z');

function io(terminal: boolean, answer = false) {
  const said: string[] = [];
  const asked: string[] = [];
  const fake: ParkingIO = {
    terminal,
    ask: async (q) => (asked.push(q), answer),
    say: (text) => said.push(text),
  };
  return { fake, said, asked };
}

test('a script must name the parking or say --current; at a terminal it need not', () => {
  expect(unnamedParking({}, false)).toMatch(/pass --answers <address> .*or --current/);
  expect(unnamedParking({ current: true }, false)).toBeNull();
  expect(unnamedParking({ answers: decisionAddress(READ) }, false)).toBeNull();
  expect(unnamedParking({}, true)).toBeNull();
});

test('--answers: the parking read is sent while the run waits there; once it moved, refused with the verdict now', async () => {
  const { fake, said, asked } = io(true, true);
  await expect(answeredAddress(WF, 'abandon by ops', { answers: decisionAddress(READ) }, READ, fake)).resolves.toBe(
    decisionAddress(READ),
  );
  const moved = answeredAddress(WF, 'abandon by ops', { answers: decisionAddress(READ) }, NOW, fake);
  await expect(moved).rejects.toBeInstanceOf(Refused);
  await expect(moved).rejects.toThrow(
    new RegExp(
      `${WF} has moved since you read it: you answer ${decisionAddress(READ)}, it now waits at ${decisionAddress(NOW)}\\n` +
        '  status {7}needs_attention at notify_customer since 2026-01-01T00:05:00.000Z: the notice bounced\\n' +
        '  verdict {6}stop and hand to a person\\n' +
        '  next action  look for the notice in the mailbox\\n' +
        `.*--answers ${decisionAddress(NOW)}`,
    ),
  );
  // A decision taken since is a move too: the address counts them.
  await expect(
    answeredAddress(WF, 'abandon by ops', { answers: decisionAddress(READ) }, parkedAt(READ.parked!.since, 1), fake),
  ).rejects.toThrow(/after-0, it now waits at .*after-1/);
  expect([said, asked]).toEqual([[], []]);
});

test('--current answers the parking the run waits at now, and says which', async () => {
  const { fake, said, asked } = io(false);
  await expect(answeredAddress(WF, 'abandon by ops', { current: true }, NOW, fake)).resolves.toBe(decisionAddress(NOW));
  expect(said).toEqual([expect.stringMatching(`answers ${decisionAddress(NOW)} \\(--current\\)\\n {2}status`)]);
  expect(asked).toEqual([]);
});

test('at a terminal without either, the verdict is shown and the decision goes only on yes', async () => {
  const yes = io(true, true);
  await expect(answeredAddress(WF, 'abandon by ops', {}, NOW, yes.fake)).resolves.toBe(decisionAddress(NOW));
  expect(yes.said).toEqual([expect.stringMatching(/waits at run-r1:.*\n {2}status .*\n {2}verdict {6}stop and hand/)]);
  expect(yes.asked).toEqual(['Send abandon by ops for this parking? [y/N] ']);
  const no = io(true, false);
  await expect(answeredAddress(WF, 'abandon by ops', {}, NOW, no.fake)).rejects.toBeInstanceOf(NotConfirmed);
});

test('confirm: yes for y or yes in any case, no for anything else and for no answer at all', async () => {
  const answer = async (typed: string | null) => {
    const input = new PassThrough();
    const output = new PassThrough();
    const asked = confirm('Send it? [y/N] ', input, output);
    if (typed === null) input.end();
    else input.write(`${typed}\n`);
    const result = await asked;
    expect(output.read()?.toString()).toBe('Send it? [y/N] ');
    return result;
  };
  expect(await answer('y')).toBe(true);
  expect(await answer(' YES ')).toBe(true);
  expect(await answer('n')).toBe(false);
  expect(await answer('')).toBe(false);
  expect(await answer('yep')).toBe(false);
  expect(await answer(null)).toBe(false);
});
