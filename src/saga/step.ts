// A saga's step as data that executes: the dependency it talks to, the kind of effect it has, where it runs (a
// pool's task queue, or locally inside the workflow task), the activity it calls, its key and the schema its result
// must match. The harness runs it as it says; nothing about it is decided behind the call. Workflow code imports
// it: pure, and it names its activity rather than importing the activities.
import type { z } from 'zod';
import type { ActivityPool } from '../contract';
import type { Boundary } from '../reliability/taxonomy';

/** read: changes nothing; write: our own store, idempotent by key; send: an effect at a provider, reconciled when unknown. */
export type EffectKind = 'read' | 'write' | 'send';

/** A pool's task queue, or `local`: inside the workflow task that needs it, for a step that spends no provider call. */
export type Runs = ActivityPool | 'local';

/** One activity call of a step: its forward action, or a call a person's decision makes at it. */
export interface StepCall<A extends string = string, In = never> {
  /** The activity it calls, with the step's input. */
  activity: A;
  boundary: Boundary;
  effect: EffectKind;
  runs: Runs;
  /** What the activity must return, its evidence aside: the result is checked against it before the saga sees it. */
  output: z.ZodObject;
  /** The step key the call sends under, read from its input (a read has none). */
  key?(input: In): string;
  /** What the step table shows of the input, when not all of it. */
  shows?(input: In): unknown;
  /** Provider requests one attempt sends: an attempt is paid for whole. */
  requestsPerAttempt?: number;
  /** Why the saga cannot go on when the business refuses the step and nothing of it happened: the run ends rejected. */
  rejects?(input: In): string;
  /** Held only to the run's deadline: spent retry time or provider calls never stop it (recording what happened). */
  essential?: boolean;
  /**
   * A store write that the named earlier send's receipt transaction may carry when the receipt lets the saga go on
   * (one task and one commit fewer); after any other receipt, or one it could not carry, it runs as its own task.
   */
  carriedBy?: string;
  /** The steps this send's receipt may carry: derived from their `carriedBy` (withCarriage), never written. */
  carries?: readonly string[];
  /** A read whose first try may run inside the named earlier step's activity, once that step's effect is recorded. */
  firstReadIn?: string;
}

/** Refuses, naming the step, a `carriedBy` or `firstReadIn` that its steps cannot honour. */
export function checkCarriage(steps: Readonly<Record<string, StepCall<string, never>>>): void {
  const names = Object.keys(steps);
  const earlier = (step: string, host: string, what: string) => {
    if (names.indexOf(host) < 0 || names.indexOf(host) >= names.indexOf(step))
      throw new Error(`step ${step} is ${what} ${host}, which is not a step declared before it`);
    return steps[host]!;
  };
  for (const [step, call] of Object.entries(steps)) {
    if (call.carriedBy !== undefined) {
      const host = earlier(step, call.carriedBy, 'carried by');
      if (call.effect !== 'write' || call.boundary !== 'store' || host.effect !== 'send')
        throw new Error(`step ${step} is carried by ${call.carriedBy}: only a store write rides on a send's receipt`);
    }
    if (call.firstReadIn === undefined) continue;
    earlier(step, call.firstReadIn, 'read first in');
    if (call.effect !== 'read')
      throw new Error(`step ${step} has its first read in ${call.firstReadIn}, but it is a ${call.effect}, not a read`);
  }
}

/** The steps, checked (checkCarriage), each send given the names of the steps its receipt may carry. */
export function withCarriage<S extends Readonly<Record<string, StepCall<string, never>>>>(steps: S): S {
  checkCarriage(steps);
  const entries = Object.entries(steps);
  return Object.fromEntries(
    entries.map(([name, call]) => {
      const carries = entries.filter(([, carried]) => carried.carriedBy === name).map(([carried]) => carried);
      return [name, carries.length ? { ...call, carries } : call];
    }),
  ) as S;
}

/** A StepCall as written, its activity's name and input type kept. */
export const defineCall = <const A extends string, In = never>(call: StepCall<A, In>): StepCall<A, In> => call;

/** A call as a step of the saga, under its name in the run's table. */
export const defineStep = <const N extends string, const A extends string, In>(name: N, call: StepCall<A, In>) => ({
  name,
  ...defineCall(call),
});

/** A step that sends under the key its input carries. */
export const keyed = <In extends { key: string }>(input: In) => input.key;

/** What a lookup answers: found with the send's receipt, absent, or unknown; and what it saw. */
export interface Lookup<R> {
  kind: 'found' | 'absent' | 'unknown';
  receipt: R | null;
  note: string;
}
