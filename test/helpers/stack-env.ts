// The environment a local stack of a test's own reads (as `npm run dev` would): its state under
// `dataDir`, every server on the given loopback ports, so that it never meets the developer's stack.
export interface StackPorts {
  temporal: number;
  ui: number;
  stripe: number;
  smtp: number;
  mailbox: number;
  webhooks: number;
  codec: number;
}

export function localStackEnv(dataDir: string, ports: StackPorts): NodeJS.ProcessEnv & { TEMPORAL_ADDRESS: string } {
  return {
    ...process.env,
    DATA_DIR: dataDir,
    TEMPORAL_ADDRESS: `127.0.0.1:${ports.temporal}`,
    TEMPORAL_UI_PORT: String(ports.ui),
    STRIPE_PORT: String(ports.stripe),
    SMTP_PORT: String(ports.smtp),
    MAILBOX_PORT: String(ports.mailbox),
    WEBHOOK_PORT: String(ports.webhooks),
    CODEC_PORT: String(ports.codec),
  };
}
