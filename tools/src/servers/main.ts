// The local servers the stack runs in one background process: the Stripe-compatible API
// (unless a real Stripe key is configured), the SMTP server with its mailbox API, and the codec
// server that lets the Web UI show the encrypted payloads decoded.
import fs from 'node:fs';
import path from 'node:path';
import { loadToolsConfig } from '../config';
import { startMailServer } from './mail-server';
import { startStripeServer } from './stripe-server';
import { configuredCodecServer, startCodecServer } from '../../../src/codec/codec-server';
import { EncryptionCodec } from '../../../src/codec/encryption-codec';
import { payloadKeyring } from '../../../src/codec/data-converter';

async function main() {
  const config = loadToolsConfig();
  fs.mkdirSync(config.dataDir, { recursive: true });
  const closers: (() => Promise<void>)[] = [];
  if (config.stripe.local) {
    const stripe = await startStripeServer({
      port: config.local.stripePort,
      dbPath: path.join(config.dataDir, 'stripe.db'),
      idempotencyTtlMs: config.stripe.idempotencyTtlMs,
      faults: config.faultInjection,
      lifecycle: config.local.lifecycle,
      // The worker's receiver, with its secret: events are delivered there unless WEBHOOKS=off.
      webhookEndpoint: { url: config.webhooks.url, secret: config.webhooks.secret ?? null },
    });
    closers.push(stripe.close);
    console.log(`Stripe-compatible API on ${stripe.url}; ${config.webhooks.secret ? `webhooks to ${config.webhooks.url}` : 'webhooks off'}`);
  }
  const mail = await startMailServer({
    smtpPort: config.local.smtpPort,
    apiPort: config.local.mailboxPort,
    dbPath: path.join(config.dataDir, 'mail.db'),
    faultApi: config.faultInjection,
  });
  closers.push(mail.close);
  console.log(`SMTP on ${mail.smtpUrl}, mailbox API on ${mail.apiUrl}`);
  const keyring = payloadKeyring(config);
  if (keyring) {
    const codec = await startCodecServer(configuredCodecServer(config, new EncryptionCodec(keyring)));
    closers.push(codec.close);
    console.log(`codec server on ${codec.url} for the Web UI at ${config.codec.origins.join(', ')}`);
  }
  if (config.faultInjection) console.log('fault injection is on: POST /_faults on the Stripe and mailbox ports (loopback only)');

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
