// The real clients the activities are built from, opened from config and closed together.
import type { Client } from '@temporalio/client';
import type { MetricMeter } from '@temporalio/common';
import { createActivities } from './activities';
import { createMailTransport, SMTP_MIN_ATTEMPT_MS } from './activities/mail-transport';
import { httpMessageLog } from './activities/message-log';
import { createStripeClient } from './activities/stripe-client';
import type { Config } from './config';
import { storeMetrics } from './observability/metrics';
import type { RecoveryPolicy } from './reliability/policy';
import { loadPolicy } from './reliability/policy-file';
import type { RunSettings } from './contract';
import { openStore } from './store';

/** Margin kept between a Stripe request's own timeout and the stripe activity's start-to-close. */
const STRIPE_TIMEOUT_MARGIN_MS = 2000;

/**
 * What every run on this worker plans with. The timeouts must nest: a request ends before its
 * attempt does, so Temporal never starts the next attempt while the last request is still out.
 */
export function runSettings(config: Config, loaded: RecoveryPolicy = loadPolicy(config.policyFile)): RunSettings {
  // DECIDERS replaces the policy's deciders, names and keys alike; unsigned decisions are a worker's setting only.
  const decisions = {
    ...loaded.decisions,
    ...config.deciders,
    ...(config.unsignedDecisions && { unsigned: 'allow' as const }),
  };
  const policy = { ...loaded, decisions };
  const { requestTimeoutMs, idempotencyTtlMs, listConsistencyMs } = config.stripe;
  const stripeAttempt = policy.timeouts.stripe.startToCloseMs;
  if (requestTimeoutMs + STRIPE_TIMEOUT_MARGIN_MS > stripeAttempt)
    throw new Error(
      `STRIPE_TIMEOUT_MS (${requestTimeoutMs}) must end at least ${STRIPE_TIMEOUT_MARGIN_MS} ms inside the policy's stripe startToCloseMs (${stripeAttempt})`,
    );
  if (policy.timeouts.smtp.startToCloseMs < SMTP_MIN_ATTEMPT_MS)
    throw new Error(
      `the policy's smtp startToCloseMs must be at least ${SMTP_MIN_ATTEMPT_MS} ms, to leave a send its own deadline inside it`,
    );
  // Treat the provider's key window as ending early: a resend must be provably inside it.
  const margin = Math.min(idempotencyTtlMs / 10, 3600_000);
  return {
    scope: config.scope,
    policy,
    provider: { dedupeWindowMs: idempotencyTtlMs - margin, consistencyMs: listConsistencyMs, requestTimeoutMs },
  };
}

/** `meter`: where the store's statements and commits and the activities' metrics are counted (the worker's, when it exports metrics). */
export async function openDeps(config: Config, temporal?: Client, meter?: MetricMeter) {
  const settings = runSettings(config);
  const observer = meter && storeMetrics(meter);
  const store = await openStore(config.databaseUrl, { faults: config.faultInjection, observer });
  const mail = createMailTransport(config.mail.smtpUrl, config.mail.smtp);
  const stripe = createStripeClient(config.stripe);
  return {
    activities: createActivities({
      stripe,
      store,
      mail,
      mailFrom: config.mail.from,
      messageLog: config.mail.log && httpMessageLog(config.mail.log),
      settings,
      temporal,
      digestTo: config.digestTo,
      maxBacklog: config.admission.maxBacklog,
      meter,
    }),
    store,
    stripe,
    settings,
    async close() {
      mail.close();
      await store.close();
    },
  };
}
