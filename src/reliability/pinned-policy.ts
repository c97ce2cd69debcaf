// The recovery policy a run is pinned to, as its history carries it: the changes from a policy the workflow
// bundle ships (none, for a worker on the default), or the policy whole when it cannot be written so. The
// workflow resolves it to the very policy the worker loaded, whichever build replays the run, so a bundle
// keeps every policy it ever shipped: changing default-policy.json means keeping the old one here, by its hash.
import { DEFAULT_POLICY } from './default-policy';
import type { RecoveryPolicy } from './policy';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** The SHA-256 of the shipped default's JSON as `JSON.stringify` writes it (a test checks it). */
export const DEFAULT_POLICY_SHA256 = 'e0296266268d53c80f96cf8b0e45e18f278c3e4fc3e055e3202aa5c0f4a376b8';

/** The policies this bundle ships, by hash; never removed (above). Every worker checks each hash at start. */
export const SHIPPED_POLICIES: ReadonlyMap<string, RecoveryPolicy> = new Map([[DEFAULT_POLICY_SHA256, DEFAULT_POLICY]]);

/** A policy as a run's history pins it: whole, or as JSON Merge Patch (RFC 7386) changes from a shipped one. */
export type PinnedPolicy = { policy: RecoveryPolicy } | { policyBase: string; policyChanges: JsonObject };

/** How a worker's policy is pinned: as changes from the default when they say it exactly, else whole. */
export function pinPolicy(policy: RecoveryPolicy): PinnedPolicy {
  const target = policy as unknown as JsonObject;
  // Merge Patch writes a removal as null, so a policy holding a null (or a value JSON drops) is kept whole.
  if (!plainJson(target)) return { policy };
  return { policyBase: DEFAULT_POLICY_SHA256, policyChanges: changes(DEFAULT_POLICY as unknown as JsonObject, target) };
}

/** The policy a pin stands for; a base this bundle does not ship is refused, never guessed. */
export function pinnedPolicy(pin: PinnedPolicy): RecoveryPolicy {
  if ('policy' in pin) return pin.policy;
  const base = SHIPPED_POLICIES.get(pin.policyBase);
  if (!base) throw new Error(`the run is pinned to a recovery policy this build does not ship (${pin.policyBase})`);
  if (Object.keys(pin.policyChanges).length === 0) return base;
  return merged(base as unknown as JsonObject, pin.policyChanges) as unknown as RecoveryPolicy;
}

const isObject = (v: Json | undefined): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function plainJson(v: unknown): boolean {
  if (v === null || v === undefined) return false;
  if (Array.isArray(v)) return v.every(plainJson);
  if (typeof v === 'object') return Object.values(v).every(plainJson);
  return typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

function changes(base: JsonObject, target: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const key of Object.keys(base)) if (!(key in target)) out[key] = null;
  for (const [key, value] of Object.entries(target)) {
    const was = base[key];
    if (isObject(was) && isObject(value)) {
      const inner = changes(was, value);
      if (Object.keys(inner).length > 0) out[key] = inner;
    } else if (!(key in base) || JSON.stringify(was) !== JSON.stringify(value)) {
      out[key] = value;
    }
  }
  return out;
}

function merged(base: JsonObject, patch: JsonObject): JsonObject {
  const out: JsonObject = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    // A key, whatever its name: `__proto__` assigned would set the object's prototype instead.
    else
      Object.defineProperty(out, key, {
        value: isObject(value) && isObject(base[key]) ? merged(base[key], value) : value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return out;
}
