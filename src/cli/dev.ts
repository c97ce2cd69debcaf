// The stack in the background and a worker in the foreground, until Ctrl-C.
import { loadConfig } from '../config';
import { ensureStack, urls } from '../stack/stack';
import { runWorker } from '../worker';

async function main() {
  const config = loadConfig();
  await ensureStack(config, { worker: false });
  const u = urls(config);
  console.log(`Temporal      ${u.temporal}
Web UI        ${u.webUi}
Stripe API    ${u.stripe}
SMTP          ${u.smtp}
Mailbox       ${u.mailbox}
Logs          ${config.dataDir}/logs
The worker runs here; Ctrl-C stops it. \`npm run stop\` stops the rest.`);
  await runWorker();
}

main().catch((err) => {
  console.error(`dev: ${(err as Error).message}`);
  process.exit(1);
});
