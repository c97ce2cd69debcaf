// Loads the recovery policy a worker runs with: the default, or a JSON file that replaces it
// (RECOVERY_POLICY_FILE). A file that does not validate stops the worker at start-up, naming
// every problem, rather than running refunds under a policy nobody meant.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { DEFAULT_POLICY } from './default-policy';
import { SHIPPED_POLICIES } from './pinned-policy';
import { parsePolicy } from './policy-schema';
import { reading } from '../domain/zod-problems';
import type { RecoveryPolicy } from './policy';

export function loadPolicy(file: string | undefined): RecoveryPolicy {
  // Checked even when a file replaces it: workflow code uses it before the worker's policy is known.
  checkWrittenOut(DEFAULT_POLICY, 'default recovery policy src/reliability/default-policy.json');
  checkShipped();
  if (file === undefined) return DEFAULT_POLICY;
  const text = reading(`cannot read the recovery policy ${file}: `, () => fs.readFileSync(file, 'utf8'));
  const json: unknown = reading(`the recovery policy ${file} is not valid JSON: `, () => JSON.parse(text));
  return parsePolicy(json, `recovery policy ${file}`);
}

/**
 * Workflow code uses the shipped default as it is written (default-policy.ts), without parsing it:
 * it must be valid and complete, every field written out, so that parsing it changes nothing.
 */
export function checkWrittenOut(policy: RecoveryPolicy, source: string): void {
  const parsed = parsePolicy(policy, source);
  if (!isDeepStrictEqual(parsed, policy))
    throw new Error(
      `${source} leaves fields to their defaults, and workflow code uses it as written: write every field out (parsing it must change nothing)`,
    );
}

/**
 * Runs pin their policy as changes from a shipped one, named by its hash: a build whose shipped policy no longer
 * has the content its hash names (default-policy.json edited in place) would resolve runs to another policy.
 */
export function checkShipped(shipped: ReadonlyMap<string, RecoveryPolicy> = SHIPPED_POLICIES): void {
  for (const [hash, policy] of shipped) {
    const actual = createHash('sha256').update(JSON.stringify(policy)).digest('hex');
    if (actual !== hash)
      throw new Error(
        `the shipped recovery policy ${policy.version} is listed under ${hash} but hashes to ${actual}: runs pinned to ${hash} ` +
          'would resolve to another policy. Keep the policy that was shipped under its hash, and list a changed one under its own (src/reliability/pinned-policy.ts)',
      );
  }
}
