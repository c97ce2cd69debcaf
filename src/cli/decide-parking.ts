// Which parking a decision answers: the one its decider read (`--answers`, as `inspect`
// prints it), the one the run waits at now when they say so (`--current`), or, at a terminal, the one
// shown to them and confirmed. A script that names none is refused: it would answer a verdict nobody read.
import readline from 'node:readline/promises';
import type { Readable, Writable } from 'node:stream';
import { decisionAddress, type RefundRunState } from '../contract';
import { verdict } from '../reliability/verdict';

export interface ParkingFlags {
  answers?: string;
  current?: boolean;
}

/** A decision not sent, and why: exits 2 with `decide: refused, nothing was recorded: …`. */
export class Refused extends Error {}
/** The person at the terminal did not confirm: nothing was sent. */
export class NotConfirmed extends Error {}

/** Before anything is read: without a terminal to confirm on, the caller must name the parking, or say --current. */
export function unnamedParking(flags: ParkingFlags, terminal: boolean): string | null {
  if (flags.answers || flags.current || terminal) return null;
  return (
    'which parking does this decision answer? Without a terminal to confirm on, pass --answers <address> ' +
    '(the Address `npm run inspect -- <workflow id>` prints for the verdict you read), or --current to answer ' +
    'whatever the run waits for now; nothing was sent'
  );
}

/** Where the run stands now, for a person: its status and why, the verdict and the next action (the Web UI's, from its state). */
function describeParking(state: RefundRunState): string {
  const judged = verdict({
    execution: 'RUNNING',
    state,
    result: null,
    failure: null,
    inferences: [],
    parkedVerdict: null,
    orderId: state.request.orderId,
    version: state.request.operationVersion,
  });
  const at = state.parked?.failedStep ? ` at ${state.parked.failedStep}` : '';
  const since = state.parked ? ` since ${state.parked.since}` : '';
  const why = state.outcome?.reason ? `: ${state.outcome.reason}` : '';
  return [
    `  status       ${state.status}${at}${since}${why}`,
    `  verdict      ${judged.verdict}`,
    `  next action  ${judged.nextAction}`,
  ].join('\n');
}

/** The run has left the parking its decider read: what it waits for now, and how to answer that instead. */
export function movedMessage(workflowId: string, given: string, state: RefundRunState): string {
  const now = decisionAddress(state);
  const again = state.parked
    ? `read it again (npm run inspect -- ${workflowId}); to answer this parking, decide with --answers ${now}`
    : `it waits for no decision now (npm run inspect -- ${workflowId})`;
  return `${workflowId} has moved since you read it: you answer ${given}, it now waits at ${now}\n${describeParking(state)}\n${again}`;
}

export interface ParkingIO {
  terminal: boolean;
  /** Asks a yes/no question on the terminal. */
  ask(question: string): Promise<boolean>;
  /** Tells the person (stderr). */
  say(text: string): void;
}

/**
 * The address the decision is sent for, from the run's state as just queried: refused (Refused) when
 * `--answers` names a parking the run has left, not confirmed (NotConfirmed) at the terminal. The address
 * goes with the decision, so that the run's validator refuses it too if the run moves before it arrives.
 */
export async function answeredAddress(
  workflowId: string,
  what: string,
  flags: ParkingFlags,
  state: RefundRunState,
  io: ParkingIO,
): Promise<string> {
  const now = decisionAddress(state);
  if (flags.answers) {
    if (flags.answers !== now) throw new Refused(movedMessage(workflowId, flags.answers, state));
    return now;
  }
  // Not parked: sent as is, and the validator says why it cannot be taken (it is carrying out a decision, say).
  if (!state.parked) return now;
  if (flags.current) {
    io.say(`decide: ${workflowId}: this decision answers ${now} (--current)\n${describeParking(state)}`);
    return now;
  }
  if (!io.terminal) throw new Error('no terminal to confirm on: pass --answers <address> or --current');
  io.say(`${workflowId} waits at ${now}\n${describeParking(state)}`);
  if (await io.ask(`Send ${what} for this parking? [y/N] `)) return now;
  throw new NotConfirmed(`not confirmed; nothing was sent`);
}

/** A yes/no question on `output`, its answer from `input`: yes only for y or yes; no answer (end of input) is no. */
export async function confirm(question: string, input: Readable, output: Writable): Promise<boolean> {
  const rl = readline.createInterface({ input, output, terminal: false });
  try {
    const closed = new Promise<string>((resolve) => rl.once('close', () => resolve('')));
    const answer = await Promise.race([rl.question(question).catch(() => ''), closed]);
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}
