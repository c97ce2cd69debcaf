// One PostgreSQL server for the whole run, on 127.0.0.1; each test file creates its own databases
// on it (test/helpers/databases.ts). Its URL reaches the test workers through the environment.
import { startPostgres, type PostgresServer } from '../src/stack/postgres';

declare global {
  var testPostgres: PostgresServer | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_POSTGRES_URL) return;
  globalThis.testPostgres = await startPostgres();
  process.env.TEST_POSTGRES_URL = globalThis.testPostgres.url;
}
