// Loads the recovery policy a worker runs with: the default, or a JSON file that replaces it
// (RECOVERY_POLICY_FILE). A file that does not validate stops the worker at start-up, naming
// every problem, rather than running refunds under a policy nobody meant.
import fs from 'node:fs';
import { DEFAULT_POLICY } from './default-policy';
import { parsePolicy } from './policy-schema';
import type { RecoveryPolicy } from './policy';

export function loadPolicy(file: string | undefined): RecoveryPolicy {
  // The shipped default is checked here too: workflow code uses it as it is (default-policy.ts).
  if (file === undefined) return parsePolicy(DEFAULT_POLICY, 'default recovery policy');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the recovery policy ${file}: ${(err as Error).message}`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`the recovery policy ${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  return parsePolicy(json, `recovery policy ${file}`);
}
