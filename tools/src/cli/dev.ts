// The stack in the background and a worker in the foreground, until Ctrl-C.
import { loadToolsConfig } from '../config';
import { registerSelf, runningPid } from '../stack/processes';
import { ensureStack, urls } from '../stack/stack';
import { runWorker } from '../../../src/worker';

async function main() {
  const config = loadToolsConfig();
  const running = runningPid(config.dataDir, 'worker');
  if (running !== undefined) {
    throw new Error(
      `a worker of this stack is already running (pid ${running}); \`npm run stop\` stops it, then run \`npm run dev\` again`,
    );
  }
  await ensureStack(config, { worker: false });
  // Local development: decisions need no signature unless DECISIONS_UNSIGNED=refuse is set.
  process.env.DECISIONS_UNSIGNED ??= 'allow';
  const u = urls(config);
  console.log(`Temporal      ${u.temporal}
Web UI        ${u.webUi}
Stripe API    ${u.stripe}
SMTP          ${u.smtp}
Mailbox       ${u.mailbox}${u.codec ? `\nCodec server  ${u.codec} (the Web UI decodes payloads through it)` : ''}
Logs          ${config.dataDir}/logs
Decisions     ${process.env.DECISIONS_UNSIGNED === 'allow' ? 'unsigned ones accepted (DECISIONS_UNSIGNED=allow: local development only)' : 'signed only (DECIDERS with keys)'}
The worker runs here; Ctrl-C (or \`npm run stop\`) stops it. \`npm run stop\` stops the rest too.`);
  // Known to `npm run stop` and `npm run demo` like a worker the stack started.
  const unregister = registerSelf(config.dataDir, 'worker', 'tools/src/cli/dev.ts');
  try {
    await runWorker();
  } finally {
    unregister();
  }
}

main().catch((err) => {
  console.error(`dev: ${(err as Error).message}`);
  process.exit(1);
});
