import type { Client } from '@temporalio/client';
import type { MetricMeter } from '@temporalio/common';
import type Stripe from 'stripe';
import type { RunSettings } from '../contract';
import type { DecisionPolicy } from '../reliability/policy';
import { Breakers } from '../reliability/circuit-breaker';
import { activityMetrics } from './activity-metrics';
import { createAttemptRunner, type Attempt } from './attempt';
import { createCheckoutActivities } from './checkout';
import { createSweepActivities } from './sweep';
import { createCompletionGate } from './completion-gate';
import { withFirstRead } from './first-read';
import { createFollowUpActivities } from './follow-up';
import { createNotificationActivities, type NotificationDeps } from './notifications';
import { createOperationActivities } from './operations';
import { createOrderActivities } from './orders';
import { createQueueActivities } from './queue';
import { refundCreation } from './create-refund';
import { refundReconciliation } from './reconcile-refund';
import { stripeIn } from './stripe-client';

/** The worker's clients and settings: its store and mail as the notifications take them, and the rest. */
export interface ActivityDeps extends Omit<NotificationDeps, 'attempt' | 'policy' | 'maxSendMs' | 'metrics'> {
  stripe: Stripe;
  /** The scope, recovery policy and provider windows every run gets from this worker. */
  settings: RunSettings;
  /** For scheduled work that reads visibility (the digest, the sweep). */
  temporal?: Client;
  /** The admission limit a batch respects when it takes queued refunds (ADMISSION_MAX_BACKLOG); none: no limit. */
  maxBacklog?: number;
  /** The worker's meter, when it exports metrics: the activities' instruments are made on it once. */
  meter?: MetricMeter;
}

export function createActivities(deps: ActivityDeps) {
  const { store, settings } = deps;
  // Each attempt sends with a client lent to it alone, which tells it of every request.
  const stripe = (attempt: Attempt) => stripeIn(deps.stripe, attempt);
  // Per worker: each worker process judges the providers' health from its own calls.
  const breakers = new Breakers(settings.policy.breaker);
  const metrics = activityMetrics(deps.meter);
  const attempt = createAttemptRunner({ policy: settings.policy, log: store.operations, breakers, metrics });
  const payments = {
    stripe,
    log: store.operations,
    attempt,
    windows: settings.provider,
    metrics,
    carryRefund: store.carryRefund,
  };
  const { createRefund } = refundCreation(payments);
  const gate = createCompletionGate({ stripe, store, attempt });
  const notifications = createNotificationActivities({ ...deps, attempt, policy: settings.policy, metrics });
  return {
    ...createOperationActivities({ store, attempt, settings }),
    createRefund,
    ...refundReconciliation(payments),
    ...createCheckoutActivities({ stripe, store, attempt, settings, createRefund }),
    checkCompletion: gate.checkCompletion,
    ...createFollowUpActivities({ stripe, store, attempt, settings, temporal: deps.temporal }),
    ...createOrderActivities({ store, attempt }),
    ...createQueueActivities({ queue: store.queue, temporal: deps.temporal, maxBacklog: deps.maxBacklog, metrics }),
    ...notifications,
    // The completion gate's first look rides in the notice's activity, once the notice is recorded sent.
    sendRefundNotice: withFirstRead(
      notifications.sendRefundNotice,
      { completion_gate: gate.firstLook },
      store.operations,
    ),
    ...createSweepActivities({ temporal: deps.temporal }),
    /** Who may decide parked runs, as this worker is configured now (the policy's roles, or DECIDERS). */
    async decisionPolicy(): Promise<DecisionPolicy> {
      return settings.policy.decisions;
    },
  };
}

export type RefundActivities = ReturnType<typeof createActivities>;
