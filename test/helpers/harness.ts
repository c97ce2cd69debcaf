// One real stack per test file: a Temporal dev server (the binary scripts/ensure-tools.sh
// provides), the local Stripe-compatible and SMTP servers, a SQLite store and a worker.
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { randomUUID } from 'node:crypto';
import { createActivities, type RefundActivities } from '../../src/activities';
import { createMailTransport } from '../../src/activities/notifications';
import { createStripeClient } from '../../src/activities/payments';
import { seedPaidOrder } from '../../src/client/seed';
import { startMailServer, type MailServer } from '../../src/servers/mail-server';
import { startStripeServer } from '../../src/servers/stripe-server';
import { SEARCH_ATTRIBUTES, type Order } from '../../src/shared';
import { findTool } from '../../src/stack/tools';
import { openStore } from '../../src/store';
import type { OrderStore } from '../../src/store/types';
import { createRefundWorker } from '../../src/worker';

export interface Harness {
  env: TestWorkflowEnvironment;
  stripe: Stripe;
  stripeUrl: string;
  mail: MailServer;
  store: OrderStore;
  worker: Worker;
  /** A second worker on its own task queue whose activities are the real ones with some replaced. */
  withWorker<T>(overrides: Partial<RefundActivities>, fn: (taskQueue: string) => Promise<T>): Promise<T>;
  seedOrder(orderId: string, opts?: { paymentMethod?: string; customerEmail?: string; amount?: number }): Promise<Order>;
  /** Effects the Stripe server really performed for a payment intent. */
  ledger(paymentIntentId: string): Promise<{ type: string; objectId: string; idempotencyKey: string | null; requestsWithKey: number }[]>;
  /** Messages the SMTP server really received, optionally for one Message-ID or recipient. */
  messages(filter?: { messageId?: string; to?: string }): Promise<{ messageId: string; to: string[]; subject: string }[]>;
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-test-'));
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTool('temporal') },
      searchAttributes: Object.values(SEARCH_ATTRIBUTES),
    },
  });
  const stripeServer = await startStripeServer({ port: 0, dbPath: path.join(dir, 'stripe.db') });
  const mail = await startMailServer({ smtpPort: 0, apiPort: 0, dbPath: path.join(dir, 'mail.db') });
  const store = openStore(`sqlite:${path.join(dir, 'orders.db')}`);
  const stripe = createStripeClient({ secretKey: 'sk_test_harness', apiBase: stripeServer.url });
  const transport = createMailTransport(mail.smtpUrl);
  const activities = createActivities({ stripe, store, mail: transport, mailFrom: 'refunds@test.local' });
  const namespace = env.namespace ?? 'default';
  const worker = await createRefundWorker({ connection: env.nativeConnection, namespace, activities });
  const running = worker.run();

  const getJson = async <T>(url: string): Promise<T> => {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`${url}: ${res.status}`);
    return (await res.json()) as T;
  };

  return {
    env,
    stripe,
    stripeUrl: stripeServer.url,
    mail,
    store,
    worker,
    async withWorker(overrides, fn) {
      const taskQueue = `refunds-${randomUUID()}`;
      const w = await createRefundWorker({
        connection: env.nativeConnection,
        namespace,
        taskQueue,
        activities: { ...activities, ...overrides },
      });
      return w.runUntil(fn(taskQueue));
    },
    async seedOrder(orderId, opts = {}) {
      return seedPaidOrder(stripe, store, {
        orderId,
        amount: opts.amount ?? 5000,
        currency: 'usd',
        customerEmail: opts.customerEmail ?? `${orderId}@example.test`,
      }, opts.paymentMethod);
    },
    async ledger(paymentIntentId) {
      const body = await getJson<{ effects: Awaited<ReturnType<Harness['ledger']>> }>(
        `${stripeServer.url}/_ledger?payment_intent=${paymentIntentId}`,
      );
      return body.effects.filter((e) => e.type === 'refund.created');
    },
    async messages(filter = {}) {
      const q = new URLSearchParams();
      if (filter.messageId) q.set('message_id', filter.messageId);
      if (filter.to) q.set('to', filter.to);
      return (await getJson<{ messages: Awaited<ReturnType<Harness['messages']>> }>(`${mail.apiUrl}/messages?${q}`)).messages;
    },
    async close() {
      worker.shutdown();
      await running;
      transport.close();
      await store.close();
      await mail.close();
      await stripeServer.close();
      await env.teardown();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
