// What the payment activities are given, and what each reads of its surroundings alike: the clock
// send stamps are compared with, and who acts in the operation's audit trail.
import { Context } from '@temporalio/activity';
import type Stripe from 'stripe';
import type { ProviderWindows } from '../contract';
import type { OperationLog } from '../store/types';
import type { AttemptRunner } from './attempt';

export interface PaymentDeps {
  stripe: Stripe;
  log: OperationLog;
  attempt: AttemptRunner;
  windows: ProviderWindows;
  /** The clock send stamps are compared with; the store's (see OperationLog.clock) unless given. */
  now?: () => number;
}

/** The clock send stamps are compared with: the deps' own, else the store's. */
export const clockOf = (deps: PaymentDeps) => async () => (deps.now ? deps.now() : deps.log.clock());

/** Who acts: the run, by its workflow id. */
export const actor = () => Context.current().info.workflowExecution?.workflowId ?? 'activity';
