// The recovery policy that ships with the project (default-policy.json), validated. Workflow code
// uses it for the one activity that runs before the worker's policy is known.
import policy from './default-policy.json';
import { parsePolicy } from './policy';

export const DEFAULT_POLICY = parsePolicy(policy, 'default recovery policy');
