import quickTeardown from './global-teardown-quick';

export default async function globalTeardown(): Promise<void> {
  await globalThis.testPostgres?.stop();
  await quickTeardown();
}
