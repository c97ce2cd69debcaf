// The local servers the stack runs in one background process: the Stripe-compatible API
// (unless a real Stripe key is configured), the SMTP server with its mailbox API, and the codec
// server that lets the Web UI show the encrypted payloads decoded.
import fs from 'node:fs';
import { startConfiguredCodecServer } from '../../../src/codec/codec-server';
import { loadToolsConfig } from '../config';
import { startStandIns } from '../stack/assembly';

async function main() {
  const config = loadToolsConfig();
  fs.mkdirSync(config.dataDir, { recursive: true });
  const closers: (() => Promise<void>)[] = [];
  const standIns = await startStandIns(config.dataDir, {
    stripe: config.stripe.local
      ? {
          port: config.local.stripePort,
          idempotencyTtlMs: config.stripe.idempotencyTtlMs,
          faults: config.faultInjection,
          lifecycle: config.local.lifecycle,
          // The worker's receiver, with its secret: events are delivered there unless WEBHOOKS=off.
          webhookEndpoint: { url: config.webhooks.url, secret: config.webhooks.secret ?? null },
        }
      : undefined,
    mail: { smtpPort: config.local.smtpPort, apiPort: config.local.mailboxPort, faultApi: config.faultInjection },
  });
  closers.push(standIns.close);
  const { stripe, mail } = standIns;
  if (stripe)
    console.log(
      `Stripe-compatible API on ${stripe.url}; ${config.webhooks.secret ? `webhooks to ${config.webhooks.url}` : 'webhooks off'}`,
    );
  console.log(`SMTP on ${mail.smtpUrl}, mailbox API on ${mail.apiUrl}`);
  const codec = await startConfiguredCodecServer(config);
  if (codec) {
    closers.push(codec.server.close);
    console.log(codec.summary);
  }
  if (config.faultInjection)
    console.log('fault injection is on: POST /_faults on the Stripe and mailbox ports (loopback only)');

  const shutdown = () => {
    Promise.all(closers.map((close) => close())).then(
      () => process.exit(0),
      (err) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((err) => {
  console.error(`servers: ${(err as Error).message}`);
  process.exit(1);
});
