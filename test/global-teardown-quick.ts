import fs from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  await globalThis.testTemporal?.stop();
  if (globalThis.testBundleDir) fs.rmSync(globalThis.testBundleDir, { recursive: true, force: true });
}
