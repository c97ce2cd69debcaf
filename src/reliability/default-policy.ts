// The recovery policy that ships with the project (default-policy.json). Workflow code uses it for
// the one activity that runs before the worker's policy is known, as it is: a complete, canonical
// policy (parsing it changes nothing), which the tests check and every worker checks at start
// (policy-file.ts), so no run spends time parsing it again.
import policy from './default-policy.json';
import type { RecoveryPolicy } from './policy';

export const DEFAULT_POLICY = policy as RecoveryPolicy;
