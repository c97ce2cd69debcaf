// What a saga's run tells the visibility store (search attributes), so operators find it without querying it,
// and, at the same moves, what its page in the Web UI says of it now (its current details).
import type { SearchAttributePair } from '@temporalio/common';
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SEARCH_ATTRIBUTES, type RunState } from '../../contract';
import { maskEmails } from '../../reliability/redaction';

/** Every saga's search attributes, its business key (an order's, a cart's) in the key attribute: found alike. */
const ATTRIBUTES = { ...SEARCH_ATTRIBUTES, key: SEARCH_ATTRIBUTES.orderId };
type Attribute = keyof typeof ATTRIBUTES;

/** How the run stands as the details are set: going on (or parked), ended with its outcome, or ended by a cancellation. */
export type Standing = 'RUNNING' | 'COMPLETED' | 'CANCELED';

/** How a saga's run shows beyond the attributes every saga sets: its page's details drawn from its state. */
export interface Shows<State> {
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
    const started = workflowInfo().typedSearchAttributes;
    if (started.get(ATTRIBUTES.key) === key && started.get(ATTRIBUTES.status) === 'running') return this.details();
    this.show('RUNNING', { key, status: 'running' });
  }

  status(status: string, step?: string): void {
    // A run that completed has ended; any other status it moves to while it runs (or is parked) goes on.
    this.show(status === 'completed' ? 'COMPLETED' : 'RUNNING', { status, ...(step && { step }) });
  }

  /** Parked: findable as needing attention, with its verdict. */
  parked(step: string | null, effect: string, verdict: string): void {
    this.show('RUNNING', { status: 'needs_attention', step: step ?? 'none', effect, verdict, needsAttention: true });
  }

  /** A decision was taken: the run moves on, no longer among those that need a person. */
  unparked(): void {
    this.show('RUNNING', { status: 'running', needsAttention: false });
  }

  ended(status: string, step: string | null, effect: string): void {
    this.show('COMPLETED', { status, step: step ?? 'none', effect, needsAttention: false });
  }

  /** Ended with work left for a person (cancelled mid-saga, or stopped when an approval expired): still among those that need one. */
  flagged(effect: string, cancelled: boolean): void {
    this.show(cancelled ? 'CANCELED' : 'COMPLETED', {
      effect,
      verdict: 'stop and hand to a person',
      needsAttention: true,
    });
  }

  /** Sets the page's details, then the attributes given, in the order given. */
  private show(standing: Standing, values: Partial<Record<Attribute, string | boolean>>): void {
    this.details(standing);
    upsertSearchAttributes(
      Object.entries(values).map(([k, value]) => ({ key: ATTRIBUTES[k as Attribute], value }) as SearchAttributePair),
    );
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
export function showRejected(key: string | null, reason: string): void {
  setCurrentDetails(maskEmails(`**rejected**: ${reason}\n\n**Next action:** none: nothing was done`));
  upsertSearchAttributes([
    { key: ATTRIBUTES.status, value: 'rejected' },
    { key: ATTRIBUTES.step, value: 'validate' },
    ...(key ? [{ key: ATTRIBUTES.key, value: key }] : []),
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

type DetailedState = Pick<RunState, 'workflowId' | 'status' | 'outcome' | 'parked' | 'effect'>;
