// A decider's key file and what decide signs with it: node:crypto signs, the workflow's pure-JS check verifies.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateKey, readKey, signDecision } from '../../src/cli/decider-keys';
import { decisionInputSchema } from '../../src/contract';
import { DEFAULT_POLICY } from '../../src/reliability/default-policy';
import { checkSignature } from '../../src/saga/workflow/signature-check';

test('keygen writes a private key only its owner reads, never over another; a key others can read is refused', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'decider-'));
  const file = path.join(dir, 'keys', 'alice.key');
  const key = generateKey(file);
  expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  expect(key.publicKey).toMatch(/^[0-9a-f]{64}$/);
  expect(readKey(file)).toMatchObject({ publicKey: key.publicKey, keyId: key.keyId });
  expect(() => generateKey(file)).toThrow(/EEXIST/);
  fs.chmodSync(file, 0o644);
  expect(() => readKey(file)).toThrow(/can be read by others \(mode 644\): chmod 600/);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('what decide signs verifies in the workflow check, and not once a field or the key differs', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'decider-'));
  const alice = generateKey(path.join(dir, 'alice.key'));
  const policy = { ...DEFAULT_POLICY.decisions, keys: { ops: alice.publicKey } };
  const to = { workflowId: 'refund-o-v1', address: 'parked-2026-01-01T00:00:00.000Z:after-0' };
  const input = signDecision(
    { decision: 'abandon', by: 'ops', reason: '  handled  ' },
    { workflowId: to.workflowId, answers: to.address },
    alice,
    60_000,
  );
  const parsed = (i: unknown) => decisionInputSchema.parse(i);
  expect(checkSignature(parsed(input), policy, to)).toBe(alice.keyId);
  expect(() => checkSignature(parsed({ ...input, decision: 'compensate' }), policy, to)).toThrow(/does not verify/);
  const other = { ...policy, keys: { ops: generateKey(path.join(dir, 'b.key')).publicKey } };
  expect(() => checkSignature(parsed(input), other, to)).toThrow(/does not verify with ops's key/);
  fs.rmSync(dir, { recursive: true, force: true });
});
