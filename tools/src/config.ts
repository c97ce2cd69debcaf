// The tooling's settings: the product's configuration (src/config.ts), plus what only the local
// stack and its stand-ins read (where they listen, and the Stripe stand-in's refund timings).
// The variables and their defaults are the ones the product's defaults point at (LOCAL_PORTS).
import { z } from 'zod';
import { LOCAL_PORTS, loadConfig } from '../../src/config';

const port = z.coerce.number().int().min(1).max(65535);
const delay = z.coerce
  .number()
  .int()
  .min(0)
  .max(7 * 86_400_000);

const toolsSchema = z.object({
  TEMPORAL_UI_PORT: port.default(LOCAL_PORTS.temporalUi),
  STRIPE_PORT: port.default(LOCAL_PORTS.stripe),
  SMTP_PORT: port.default(LOCAL_PORTS.smtp),
  MAILBOX_PORT: port.default(LOCAL_PORTS.mailbox),
  STRIPE_REFUND_SETTLE_MS: delay.default(30_000),
  STRIPE_REFUND_FAIL_MS: delay.default(0),
});

export type ToolsConfig = ReturnType<typeof loadToolsConfig>;

export function loadToolsConfig(env: NodeJS.ProcessEnv = process.env) {
  const product = loadConfig(env);
  const parsed = toolsSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(
      `invalid environment: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  const e = parsed.data;
  return {
    ...product,
    /** The environment this was read from: the processes the stack starts read the same. */
    env,
    /** Where the stack's processes listen. */
    local: {
      temporalUiPort: e.TEMPORAL_UI_PORT,
      stripePort: e.STRIPE_PORT,
      smtpPort: e.SMTP_PORT,
      mailboxPort: e.MAILBOX_PORT,
      /** When the Stripe stand-in settles pm_card_refundPending refunds and fails pm_card_refundFail ones. */
      lifecycle: { settleDelayMs: e.STRIPE_REFUND_SETTLE_MS, failDelayMs: e.STRIPE_REFUND_FAIL_MS },
    },
  };
}
