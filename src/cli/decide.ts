// `npm run decide -- <workflow id> <decision> --answers <address> --by <who> --reason …`: signs a decision
// with the decider's key for the parking its decider read (decide-parking.ts) and sends it to the run as
// the `decide` Update (or, with --print, prints it for `temporal workflow update execute`). The Update id
// is a business key (the decision and the parking it answers), so sending the same decision twice applies
// it once. `npm run decide -- keygen` makes a key.
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { Command, InvalidArgumentError, Option } from 'commander';
import fs from 'node:fs';
import { workerPolling } from '../temporal/client';
import { REFUND_STEPS } from '../compensations/registry';
import { loadConfig } from '../config';
import { DECISION_KINDS, deciderNameSchema, ROLES } from '../reliability/policy-terms';
import {
  decisionAddress,
  DECISION_ADDRESS,
  decisionUpdate,
  decisionUpdateId,
  MAX_SIGNATURE_TTL_MS,
  stepsQuery,
  type DecisionInput,
  type RefundWorkflow,
} from '../contract';
import { exitOnError, noSuchRun, withClient } from './common';
import { defaultKeyFile, generateKey, readKey, signDecision, type DeciderKey } from './decider-keys';
import { answeredAddress, confirm, movedMessage, Refused, unnamedParking, type ParkingFlags } from './decide-parking';

const address = (value: string) => {
  if (!DECISION_ADDRESS.test(value))
    throw new InvalidArgumentError(
      `must be a parking's address as \`npm run inspect -- <workflow id>\` prints it (run-<run id>:parked-<since>:after-<n>), got "${value}"`,
    );
  return value;
};

const program = new Command('decide')
  .description(
    'Sign a decision with your key and send it to a refund run that waits for one (see `npm run inspect -- <workflow id>`).',
  )
  .argument('<workflow-id>', 'the parked run, e.g. refund-ord_1-v1')
  .addArgument(new Command().createArgument('<decision>', 'the decision').choices(DECISION_KINDS))
  .requiredOption('--by <name>', 'who decides: a name the policy gives a role (DECIDERS)')
  .requiredOption(
    '--reason <why>',
    'why, for the record (for confirm-delivered: your evidence, e.g. where you found the message)',
  )
  .addOption(
    new Option(
      '--answers <address>',
      'the parking you read: the Address `npm run inspect` prints; refused if the run has moved',
    )
      .argParser(address)
      .conflicts('current'),
  )
  .option('--current', 'answer whatever the run waits for now (shown on stderr), for a script that did not read it')
  .addOption(
    new Option('--step <step>', 'for retry-step: the step (default: the one that failed)').choices(REFUND_STEPS),
  )
  .option('--update-id <id>', 'the Update id (default: derived from the decision and the parking it answers)')
  .option('--key <file>', "the decider's private key (default: DECIDER_KEY_FILE, else ~/.durable-refunds/<by>.key)")
  .option('--expires-in <duration>', 'how long the signature is good for, e.g. 15m, 2h (at most 24h)', '1h')
  .option('--print', 'print the signed input for `temporal workflow update execute` instead of sending it')
  .option('--json', 'print the decision record as JSON')
  .addHelpText(
    'after',
    '\nWithout --answers or --current, decide shows the verdict it is about to answer and asks on the terminal;' +
      '\nwithout a terminal it refuses.' +
      '\nA key pair: npm run decide -- keygen --name <name> [--roles operator+approver] [--out <file>]',
  )
  .showHelpAfterError();

const keygen = new Command('decide keygen')
  .description(
    "Make a decider's Ed25519 key pair: the private key in a file only you can read, the public key for DECIDERS.",
  )
  .requiredOption('--name <name>', 'the decider, as decisions name them (--by)')
  .option('--roles <roles>', `the roles for DECIDERS: ${ROLES.join(', ')}, joined with +`, 'operator')
  .option('--out <file>', 'where to write the private key (default: ~/.durable-refunds/<name>.key)')
  .showHelpAfterError();

function makeKey(argv: string[]) {
  keygen.parse(argv, { from: 'user' });
  const { name, roles, out } = keygen.opts<{ name: string; roles: string; out?: string }>();
  const badName = deciderNameSchema.safeParse(name);
  if (!badName.success) throw new Error(`--name ${badName.error.issues[0].message}`);
  const unknown = roles.split('+').filter((r) => !(ROLES as readonly string[]).includes(r));
  if (unknown.length) throw new Error(`--roles: ${unknown.join(', ')} is not one of ${ROLES.join(', ')}`);
  const file = out ?? defaultKeyFile(name);
  if (fs.existsSync(file)) throw new Error(`${file} exists; keygen never overwrites a key (--out <file> for another)`);
  const key = generateKey(file);
  console.log(`private key  ${file} (mode 0600: keep it to yourself)
key id       ${key.keyId}
DECIDERS     ${name}=${roles}:${key.publicKey}
Add the DECIDERS entry (comma-separated with the others) to the workers' environment and restart them; a run reads
who may decide when it parks. Decide with: npm run decide -- <workflow id> <decision> --answers <address> --by ${name} --reason "<why>"
(the address is the parking you read: \`npm run inspect -- <workflow id>\` prints it)`);
}

/** 15m, 2h, 90s: in milliseconds, at most MAX_SIGNATURE_TTL_MS. */
function duration(text: string): number {
  const m = /^(\d+)(s|m|h)$/.exec(text);
  const ms = m ? Number(m[1]) * { s: 1000, m: 60_000, h: 3600_000 }[m[2] as 's' | 'm' | 'h'] : NaN;
  if (!(ms > 0) || ms > MAX_SIGNATURE_TTL_MS) throw new Error(`--expires-in must be like 15m or 2h, at most 24h`);
  return ms;
}

/** The decider's key: --key, DECIDER_KEY_FILE, or the default file for the name if it exists; none: the decision goes unsigned. */
function deciderKey(by: string, given?: string): DeciderKey | undefined {
  const file = given ?? process.env.DECIDER_KEY_FILE;
  if (file) return readKey(file);
  return fs.existsSync(defaultKeyFile(by)) ? readKey(defaultKeyFile(by)) : undefined;
}

async function main() {
  if (process.argv[2] === 'keygen') return makeKey(process.argv.slice(3));
  program.parse();
  const [workflowId, decision] = program.args as [string, DecisionInput['decision']];
  type Flags = ParkingFlags & Pick<DecisionInput, 'by' | 'reason' | 'step'> & { updateId?: string; key?: string };
  const opts = program.opts<Flags & { expiresIn: string; print?: boolean; json?: boolean }>();
  const terminal = Boolean(process.stdin.isTTY);
  const unnamed = unnamedParking(opts, terminal);
  if (unnamed) program.error(`decide: ${unnamed}`, { exitCode: 2 });
  const ttlMs = duration(opts.expiresIn);
  const key = deciderKey(opts.by, opts.key);
  const config = loadConfig();
  await withClient(config, async (client) => {
    const handle = client.workflow.getHandle<RefundWorkflow>(workflowId);
    // An Update waits for a worker on the run's own queue to take it: without one the command would hang.
    const { taskQueue } = await handle.describe();
    if (!(await workerPolling(client, taskQueue)))
      throw new Error(
        `no worker is polling task queue "${taskQueue}" on ${config.temporal.address}; start one with \`npm start\`, then decide again`,
      );
    const state = await handle.query(stepsQuery);
    const fields = { decision, by: opts.by, reason: opts.reason, ...(opts.step && { step: opts.step }) };
    const what = `${decision}${opts.step ? ` ${opts.step}` : ''} by ${opts.by}`;
    const io = {
      terminal,
      ask: (question: string) => confirm(question, process.stdin, process.stderr),
      say: (text: string) => console.error(text),
    };
    const answers = await answeredAddress(workflowId, what, opts, state, io);
    const updateId = opts.updateId ?? decisionUpdateId(fields, state);
    const input: DecisionInput = key
      ? signDecision(fields, { workflowId, answers }, key, ttlMs)
      : { ...fields, answers };
    if (!key && decision !== 'reconcile')
      console.error(
        `decide: no key for ${opts.by} (--key, DECIDER_KEY_FILE or ${defaultKeyFile(opts.by)}): unsigned, which only workers with DECISIONS_UNSIGNED=allow take`,
      );
    if (opts.print) return printForTemporalCli(workflowId, updateId, input, key);
    const record = await handle
      .executeUpdate(decisionUpdate, { args: [input], updateId })
      .catch(async (err: unknown) => {
        if (!(err instanceof WorkflowUpdateFailedError)) throw err;
        // It moved between the Query and the Update (the validator refused it): say where it waits now.
        const now = await handle.query(stepsQuery).catch(() => null);
        const moved = now && decisionAddress(now) !== answers ? `\n${movedMessage(workflowId, answers, now)}` : '';
        throw new Refused(`${err.cause?.message ?? err.message}${moved}`);
      });
    if (opts.json) return console.log(JSON.stringify({ workflowId, updateId, record }, null, 2));
    console.log(
      `${workflowId}: decision #${record.seq} ${record.decision}${record.step ? ` ${record.step}` : ''} by ${record.by}${record.keyId ? `, signed with ${record.keyId}` : ''} (update id ${updateId})`,
    );
    if (record.outcome === 'awaiting_approval') {
      const approvers = state.parked?.approvedBy.filter((name) => name !== record.by) ?? [];
      // The proposal is the parking the approver answers: inspect shows it with its address.
      console.log(
        `waits for a second person (${approvers.join(', ') || 'an approver'}) until ${record.expiresAt}; unapproved, the run stops.\n` +
          `approve: npm run inspect -- ${workflowId}, then npm run decide -- ${workflowId} approve --answers <address> --by <approver> --reason "<why>"`,
      );
    } else console.log(`${record.outcome}; \`npm run inspect -- ${workflowId}\` shows where the run is now`);
  });
}

/** The signed input on stdout (for `$(…)`), the command that sends it on stderr. */
function printForTemporalCli(workflowId: string, updateId: string, input: DecisionInput, key?: DeciderKey) {
  const json = JSON.stringify(input);
  console.log(json);
  console.error(
    `${key ? `signed with ${key.keyId}, valid until ${input.signed?.expiresAt}` : 'unsigned'}; send it with (TEMPORAL_CODEC_ENDPOINT set when payloads are encrypted):\n` +
      `temporal workflow update execute --workflow-id ${workflowId} --name decide --update-id ${updateId} --input '${json.replaceAll("'", "'\\''")}'`,
  );
}

exitOnError('decide', main(), (err) =>
  err instanceof Refused
    ? { code: 2, message: `refused, nothing was recorded: ${err.message}` }
    : noSuchRun(err, program.args[0], 'wait for a decision'),
);
