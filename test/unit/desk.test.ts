// The decide validator and the verdict, outside a workflow: which decisions fit which state.
import type { RefundStep } from '../../src/contract';
import { DecisionDesk, type DeskView } from '../../src/saga/workflow/desk';
import { refundRefusals, type RefundFacts } from '../../src/workflows/refund/decisions';
import { effectOfRecord } from '../../src/reliability/effect-of-record';
import { redact } from '../../src/reliability/redaction';
import {
  decidersOf,
  verdict,
  type InspectedRun,
  type ParkedEvidence,
  type VerdictFacts,
} from '../../src/reliability/verdict';
import type { DecisionPolicy } from '../../src/reliability/policy';

// Which decisions fit which state, unsigned: signatures have their cases in test/workflow/decisions.test.ts.
const POLICY: DecisionPolicy = {
  roles: { ops: ['operator'], lead: ['operator', 'approver'] },
  keys: {},
  unsigned: 'allow',
  needApproval: ['compensate'],
  approvalTtlMs: 60_000,
};

const SINCE = '2026-01-01T00:00:00.000Z';

type Over = Partial<RefundFacts & Pick<DeskView<RefundStep>, 'parked' | 'policy'>>;
function desk(over: Over = {}, policy = POLICY) {
  const facts: RefundFacts = {
    effect: () => 'refunded',
    cannotCompensate: () => 'the refund is refunded',
    outcomeUnknown: () => false,
    ...over,
  };
  const view: DeskView<RefundStep> = {
    parked: 'parked' in over ? over.parked! : { failedStep: 'update_order', since: SINCE },
    policy: over.policy ?? (() => policy),
    refuses: refundRefusals(facts),
  };
  return new DecisionDesk(view, { workflowId: 'refund-ord_1-v1', runId: 'run-1' });
}

test('a decision taken holds until the run parks again: a second one is refused', () => {
  const d = desk();
  d.validate({ decision: 'retry-step', by: 'ops', reason: 'writer gone' });
  d.apply({ decision: 'retry-step', by: 'ops', reason: 'writer gone' });
  expect(() => d.validate({ decision: 'abandon', by: 'lead', reason: 'too late' })).toThrow(
    /retry-step by ops was already taken; the run is carrying it out/,
  );
  d.reopen();
  expect(() => d.validate({ decision: 'abandon', by: 'lead', reason: 'parked again' })).not.toThrow();
});

test('a run being cancelled takes no decision, an approval of a waiting proposal included', () => {
  const d = desk({ cannotCompensate: () => null });
  d.apply({ decision: 'compensate', by: 'ops', reason: 'proposed' });
  d.close('it is being cancelled');
  expect(() => d.validate({ decision: 'approve', by: 'lead', reason: 'go' })).toThrow(
    'the run takes no decision: it is being cancelled',
  );
  expect(() => d.validate({ decision: 'abandon', by: 'ops', reason: 'stop' })).toThrow(/takes no decision/);
});

test('a decision that names the parking it answers is refused once the run has left it, before anything else is judged', () => {
  const d = desk();
  const here = `run-run-1:parked-${SINCE}:after-0`;
  expect(() => d.validate({ decision: 'abandon', by: 'ops', reason: 'as read', answers: here })).not.toThrow();
  // Read at an earlier parking: whether the step fits now is not the question its decider answered.
  const earlier = 'run-run-1:parked-2025-12-31T00:00:00.000Z:after-0';
  const retry = { decision: 'retry-step', step: 'create_refund', by: 'ops', reason: 'as read' } as const;
  expect(() => d.validate({ ...retry, answers: earlier })).toThrow(
    `the decision answers ${earlier}, but the run is now at ${here} (it parked again or took a decision since)`,
  );
  d.apply({ decision: 'compensate', by: 'ops', reason: 'proposed' });
  expect(() => d.validate({ decision: 'approve', by: 'lead', reason: 'as read', answers: here })).toThrow(
    /but the run is now at run-run-1:parked-.*:after-1/,
  );
});

test("a decision taken in the same workflow task as the provider's failure is carried out first: its caller was told it was applied", () => {
  const d = desk();
  expect(d.firstOf('provider_failed')).toBe('provider_failed');
  d.apply({ decision: 'retry-step', by: 'ops', reason: 'writer back' });
  expect(d.firstOf('provider_failed')).toMatchObject({
    kind: 'retry-step',
    step: 'update_order',
    record: { decision: 'retry-step', by: 'ops', outcome: 'applied' },
  });
  d.reopen();
  expect(d.firstOf('provider_failed')).toBe('provider_failed');
});

test('retry-step is refused while the refund failed and compensations are open: that is compensate, with its approval', () => {
  const d = desk({ parked: { failedStep: 'completion_gate', since: SINCE }, cannotCompensate: () => null });
  expect(() => d.validate({ decision: 'retry-step', by: 'ops', reason: 'again' })).toThrow(
    /compensate, not retry-step/,
  );
  // Naming another step, it is told the same, not sent to retry a step the next answer refuses.
  expect(() => d.validate({ decision: 'retry-step', step: 'update_order', by: 'ops', reason: 'again' })).toThrow(
    /compensate, not retry-step/,
  );
  expect(() => d.validate({ decision: 'compensate', by: 'ops', reason: 'undo' })).not.toThrow();
});

test('a proposal past its expiry can no longer be approved', () => {
  const d = desk({ cannotCompensate: () => null }, { ...POLICY, approvalTtlMs: 1000 });
  const proposal = d.apply({ decision: 'compensate', by: 'ops', reason: 'undo' });
  expect(proposal).toMatchObject({ outcome: 'awaiting_approval' });
  expect(() => d.validate({ decision: 'approve', by: 'lead', reason: 'ok' })).not.toThrow();
  const later = jest.spyOn(Date, 'now').mockReturnValue(Date.parse(proposal.expiresAt!));
  try {
    expect(() => d.validate({ decision: 'approve', by: 'lead', reason: 'ok' })).toThrow(
      /compensate by ops expired at .*; it can no longer be answered/,
    );
  } finally {
    later.mockRestore();
  }
});

test('the sweep asks a run to reconcile at most once in six hours; a person may ask any time', () => {
  const d = desk({ parked: { failedStep: 'create_refund', since: SINCE }, effect: () => 'unknown' });
  d.apply({ decision: 'reconcile', by: 'sweep', reason: 'scheduled sweep' });
  d.reopen();
  expect(() => d.validate({ decision: 'reconcile', by: 'sweep', reason: 'next sweep' })).toThrow(
    /the sweep asked at .*; it asks again after/,
  );
  expect(() => d.validate({ decision: 'reconcile', by: 'anyone', reason: 'look again' })).not.toThrow();
  expect(() => desk().validate({ decision: 'reconcile', by: 'sweep', reason: 'x' })).toThrow(
    /nothing to reconcile: the refund is refunded/,
  );
});

test('confirm-delivered fits only a notice whose outcome is unknown; taken, it is what the run carries out', () => {
  const unknownNotice = desk({
    parked: { failedStep: 'notify_customer', since: SINCE },
    outcomeUnknown: (step) => step === 'notify_customer',
  });
  unknownNotice.validate({ decision: 'confirm-delivered', by: 'ops', reason: 'in the mailbox' });
  expect(() =>
    desk({ parked: { failedStep: 'notify_customer', since: SINCE } }).validate({
      decision: 'confirm-delivered',
      by: 'ops',
      reason: 'x',
    }),
  ).toThrow(/nothing to confirm: .*; its outcome is known/);
  expect(() => desk().validate({ decision: 'confirm-delivered', by: 'ops', reason: 'x' })).toThrow(
    /nothing to confirm: .*; the run stopped at update_order/,
  );
  expect(() => unknownNotice.validate({ decision: 'confirm-delivered', by: 'mallory', reason: 'x' })).toThrow(
    /mallory may not confirm-delivered: it takes the operator role/,
  );
  expect(unknownNotice.apply({ decision: 'confirm-delivered', by: 'ops', reason: 'in the mailbox' })).toMatchObject({
    decision: 'confirm-delivered',
    outcome: 'applied',
    step: null,
  });
});

describe('the verdict', () => {
  const facts = (over: Partial<VerdictFacts>): VerdictFacts => ({
    effect: { status: 'refunded', certainty: 'completed' },
    failedStep: 'create_refund',
    failure: { code: 'RATE_LIMIT', certainty: 'not_executed' },
    quarantined: false,
    compensationPending: false,
    operationId: 'refund:test:o:v1',
    noticeMessageId: null,
    ...over,
  });
  /** A parked run's evidence: the facts, and who may decide under POLICY. */
  const parked = (facts: VerdictFacts): ParkedEvidence => ({ facts, deciders: decidersOf(POLICY) });

  test('an unknown refund is never "auto-retry is safe", whatever failed last', () => {
    expect(verdict(parked(facts({ effect: { status: 'unknown', certainty: 'may_have_executed' } }))).verdict).toBe(
      'stop and hand to a person',
    );
    expect(verdict(parked(facts({ effect: { status: 'partial', certainty: 'partial' } }))).verdict).toBe(
      'stop and hand to a person',
    );
  });

  test("an unknown refund's next action says what retry-step create_refund does", () => {
    const unknown = {
      effect: { status: 'unknown', certainty: 'may_have_executed' },
      failedStep: 'create_refund' as const,
    };
    expect(verdict(parked(facts(unknown))).nextAction).toMatch(
      /retry-step create_refund, which looks the refund up at the provider first and sends only if it is not there/,
    );
  });

  test('a notice whose hand-over is unknown: look in the mailbox, then confirm-delivered or retry-step, never abandon', () => {
    const view = verdict(
      parked(
        facts({
          failedStep: 'notify_customer',
          failure: { code: 'UNKNOWN_OUTCOME', certainty: 'may_have_executed' },
          noticeMessageId: '<n@x>',
        }),
      ),
    );
    expect(view.nextAction).toMatch(
      /^look for <n@x> in the mailbox: if it is there, confirm-delivered .*; if not, retry-step notify_customer/,
    );
    expect(view.nextAction).not.toMatch(/abandon/);
  });

  test('a notice an earlier attempt may have delivered is looked for in the mailbox, whatever the last attempt said', () => {
    const stuck = facts({
      failedStep: 'notify_customer',
      failure: { code: 'CAPACITY', certainty: 'not_executed' },
      noticeMessageId: '<n@x>',
    });
    expect(verdict(parked(stuck)).verdict).toBe('auto-retry is safe');
    expect(verdict(parked({ ...stuck, earlierAttemptMayHaveTakenEffect: true }))).toMatchObject({
      verdict: 'stop and hand to a person',
      nextAction: expect.stringMatching(/^look for <n@x> in the mailbox/),
    });
  });

  test('the effect from the operation’s record: a send of open outcome means a refund may exist; refused sends, proven, mean none', () => {
    expect(effectOfRecord({ status: 'unknown', requestsSent: 6, provenAbsentThrough: null })).toMatchObject({
      status: 'unknown',
      why: expect.stringMatching(/may exist/),
    });
    expect(effectOfRecord({ status: 'intent', requestsSent: 2, provenAbsentThrough: 1 }).status).toBe('unknown');
    expect(effectOfRecord({ status: 'intent', requestsSent: 5, provenAbsentThrough: 5 }).status).toBe('none');
    expect(effectOfRecord({ status: 'intent', requestsSent: 0, provenAbsentThrough: null }).status).toBe('none');
    expect(
      effectOfRecord({ status: 'refunded', requestsSent: 2, provenAbsentThrough: null, refund: { refundId: 're_1' } })
        .status,
    ).toBe('refunded');
  });

  test('a held notice: look for its Message-ID in the mailbox before a compensate decision sends a correction', () => {
    const view = verdict(
      parked(
        facts({
          effect: { status: 'failed', certainty: 'completed' },
          failedStep: 'completion_gate',
          failure: null,
          compensationPending: true,
          noticeMessageId: '<n@x>',
          noticeHeld: true,
        }),
      ),
    );
    expect(view).toMatchObject({ verdict: 'compensate, then resume', decision: 'compensate' });
    expect(view.nextAction).toMatch(
      /^look for <n@x> in the mailbox first: if it is there, compensate sends the correction/,
    );
  });

  test('a failure that left nothing behind, with the refund known, is safe to retry', () => {
    expect(
      verdict(
        parked(facts({ failedStep: 'update_order', failure: { code: 'STATE_CONFLICT', certainty: 'not_executed' } })),
      ),
    ).toMatchObject({
      verdict: 'auto-retry is safe',
      decision: 'retry-step:update_order',
    });
  });

  describe('one function for the run and for inspect', () => {
    type Proposal = NonNullable<InspectedRun['state']>['decisions'][number];
    /** A parked run as `inspect` sees it: its state shows its own verdict and the evidence it drew it from (redacted, as the steps Query shows it). */
    const inspected = (shown: ParkedEvidence, decisions: Proposal[] = []): InspectedRun => ({
      execution: 'RUNNING',
      state: {
        status: 'needs_attention',
        parked: redact({ ...verdict(shown), ...shown }),
        decisions,
        steps: [],
        outcome: { reason: 'parked' },
      },
      result: null,
      failure: null,
      inferences: [],
      parkedVerdict: null,
      orderId: 'o',
      version: 1,
    });
    const cases: [string, VerdictFacts][] = [
      [
        'a retryable conflict',
        facts({ failedStep: 'update_order', failure: { code: 'STATE_CONFLICT', certainty: 'not_executed' } }),
      ],
      ['an unknown refund', facts({ effect: { status: 'unknown', certainty: 'may_have_executed' } })],
      [
        'a held notice',
        facts({
          effect: { status: 'failed', certainty: 'completed' },
          failedStep: 'completion_gate',
          failure: null,
          compensationPending: true,
          noticeMessageId: '<n@durable-refunds.local>',
          noticeHeld: true,
        }),
      ],
    ];

    test.each(cases)("inspect's verdict of a parked run is the run's own, drawn from its facts: %s", (_, f) => {
      const own = verdict(parked(f));
      expect(verdict(inspected(parked(f)))).toEqual(own);
    });

    test('inspect draws it from the facts the run shows, not from a verdict copied beside them', () => {
      const f = facts({ effect: { status: 'unknown', certainty: 'may_have_executed' } });
      const run = inspected(parked(f));
      run.state!.parked = { ...run.state!.parked!, verdict: 'auto-retry is safe', nextAction: 'stale' };
      expect(verdict(run)).toMatchObject({
        verdict: 'stop and hand to a person',
        nextAction: expect.stringMatching(/^reconcile operation/),
      });
    });

    test("deciders named like addresses are masked alike in the run's verdict and in the one inspect draws", () => {
      const shown: ParkedEvidence = {
        facts: facts({
          effect: { status: 'failed', certainty: 'completed' },
          failure: null,
          compensationPending: true,
        }),
        deciders: decidersOf({
          roles: { 'ops@example.test': ['operator'], 'lead@example.test': ['approver'] },
          needApproval: ['compensate'],
        }),
      };
      const drawn = verdict(inspected(shown));
      expect(drawn).toEqual(redact(verdict(shown)));
      expect(drawn).toMatchObject({ decidedBy: ['o***@example.test'], approvedBy: ['l***@example.test'] });
    });

    test('a proposal awaiting approval: inspect asks the approvers of the verdict drawn from the facts', () => {
      const f = facts({
        effect: { status: 'failed', certainty: 'completed' },
        failure: null,
        compensationPending: true,
      });
      const pending: Proposal = {
        outcome: 'awaiting_approval',
        decision: 'compensate',
        step: null,
        by: 'ops',
        reason: 'undo',
        expiresAt: 'soon',
      };
      expect(verdict(inspected(parked(f), [pending]))).toEqual({
        verdict: 'compensate, then resume',
        nextAction: expect.stringMatching(/^approve or reject compensate proposed by ops \("undo"\)/),
        decision: 'approve',
        decidedBy: ['lead'],
        approvedBy: [],
      });
    });

    test('a state without the evidence (a worker of earlier code answered) shows the verdict the run gave itself', () => {
      const f = facts({ failedStep: 'update_order', failure: { code: 'STATE_CONFLICT', certainty: 'not_executed' } });
      const run = inspected(parked(f));
      run.state!.parked = { ...verdict(parked(f)) };
      expect(verdict(run)).toEqual(verdict(parked(f)));
    });
  });
});
