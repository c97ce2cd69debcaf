// What a saga's run tells the visibility store (search attributes), so that operators find it by
// status, step, effect, verdict and whether it needs a person without querying it; and, at the same
// moves, what its page in the Web UI says of it now (its current details, rendered by the saga).
import type { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { maskEmails } from '../../reliability/redaction';

type Key<T extends SearchAttributeType> = ReturnType<typeof defineSearchAttributeKey<T>>;
type Keyword = Key<typeof SearchAttributeType.KEYWORD>;

/** A saga's search attributes: its business key, status, step, effect, verdict and whether it needs a person. */
export interface SagaAttributes {
  key: Keyword;
  status: Keyword;
  step: Keyword;
  effect: Keyword;
  verdict: Keyword;
  needsAttention: Key<typeof SearchAttributeType.BOOL>;
}

/** How the run stands as the details are set: going on (or parked), ended with its outcome, or ended by a cancellation. */
export type Standing = 'RUNNING' | 'COMPLETED' | 'CANCELED';

/** How a saga's run shows: its attributes, and its page's details drawn from its state. */
export interface Shows<State> {
  attributes: SagaAttributes;
  details(state: State, standing: Standing): string;
}

/** The moves a run shows, each once, as it makes it. */
export class Visibility<State> {
  constructor(
    private readonly shows: Shows<State>,
    private readonly state: () => State,
  ) {}

  /** A run started with these set (in its started event) needs no upsert; one started another way says so itself. */
  started(key: string): void {
    const a = this.shows.attributes;
    this.details();
    const started = workflowInfo().typedSearchAttributes;
    if (started.get(a.key) === key && started.get(a.status) === 'running') return;
    upsertSearchAttributes([
      { key: a.key, value: key },
      { key: a.status, value: 'running' },
    ]);
  }

  status(status: string, step?: string): void {
    const a = this.shows.attributes;
    // A run that completed has ended; any other status it moves to while it runs (or is parked) goes on.
    this.details(status === 'completed' ? 'COMPLETED' : 'RUNNING');
    upsertSearchAttributes([{ key: a.status, value: status }, ...(step ? [{ key: a.step, value: step }] : [])]);
  }

  /** Parked: findable as needing attention, with its verdict. */
  parked(step: string | null, effect: string, verdict: string): void {
    const a = this.shows.attributes;
    this.details();
    upsertSearchAttributes([
      { key: a.status, value: 'needs_attention' },
      { key: a.step, value: step ?? 'none' },
      { key: a.effect, value: effect },
      { key: a.verdict, value: verdict },
      { key: a.needsAttention, value: true },
    ]);
  }

  /** A decision was taken: the run moves on, no longer among those that need a person. */
  unparked(): void {
    const a = this.shows.attributes;
    this.details();
    upsertSearchAttributes([
      { key: a.status, value: 'running' },
      { key: a.needsAttention, value: false },
    ]);
  }

  ended(status: string, step: string | null, effect: string): void {
    const a = this.shows.attributes;
    this.details('COMPLETED');
    upsertSearchAttributes([
      { key: a.status, value: status },
      { key: a.step, value: step ?? 'none' },
      { key: a.effect, value: effect },
      { key: a.needsAttention, value: false },
    ]);
  }

  /** Ended with work left for a person (cancelled mid-saga, or stopped when an approval expired): still among those that need one. */
  flagged(effect: string, cancelled: boolean): void {
    const a = this.shows.attributes;
    this.details(cancelled ? 'CANCELED' : 'COMPLETED');
    upsertSearchAttributes([
      { key: a.effect, value: effect },
      { key: a.verdict, value: 'stop and hand to a person' },
      { key: a.needsAttention, value: true },
    ]);
  }

  private details(standing: Standing = 'RUNNING'): void {
    try {
      setCurrentDetails(this.shows.details(this.state(), standing));
    } catch {
      // What the page says is never worth failing (or, at the start, rejecting) a run for: it keeps the last details.
    }
  }
}

/** Refused before anything ran: still findable as rejected, by its key when the input named a valid one. */
export function showRejected(attributes: SagaAttributes, key: string | null, reason: string): void {
  setCurrentDetails(maskEmails(`**rejected**: ${reason}\n\n**Next action:** none: nothing was done`));
  upsertSearchAttributes([
    { key: attributes.status, value: 'rejected' },
    { key: attributes.step, value: 'validate' },
    ...(key ? [{ key: attributes.key, value: key }] : []),
  ]);
}

/** What a run's page says by default: where it stands, its verdict while parked, its effect, where its evidence is. */
export function runDetails(effect: string) {
  return (state: DetailedState, standing: Standing): string => {
    const { outcome, parked, workflowId } = state;
    const at = outcome?.failedStep ? ` at ${outcome.failedStep}` : '';
    return maskEmails(
      [
        `**${standing === 'CANCELED' ? 'cancelled' : state.status}**${outcome ? `${at}: ${outcome.reason}` : ''}`,
        ...(parked ? [`**Verdict:** ${parked.verdict}`, `**Decide:** \`npm run decide -- ${workflowId} …\``] : []),
        `**${effect}:** ${state.effect.status}`,
        `**Evidence:** \`npm run inspect -- ${workflowId}\``,
      ].join('\n\n'),
    );
  };
}

interface DetailedState {
  workflowId: string;
  status: string;
  outcome: { failedStep: string | null; reason: string } | null;
  parked: { verdict: string } | null;
  effect: { status: string };
}
