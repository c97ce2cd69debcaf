// The full suite: what the quick tier sets up (the bundle, the shared Temporal dev server), and one
// PostgreSQL server on 127.0.0.1 on which each test file that needs it creates its own databases
// (test/helpers/databases.ts). Its URL reaches the test workers through the environment.
import { startPostgres, type PostgresServer } from '../tools/src/stack/postgres';
import quickSetup from './global-setup-quick';

declare global {
  var testPostgres: PostgresServer | undefined;
}

export default async function globalSetup(): Promise<void> {
  const postgres = process.env.TEST_POSTGRES_URL
    ? Promise.resolve()
    : startPostgres().then((pg) => {
        globalThis.testPostgres = pg;
        process.env.TEST_POSTGRES_URL = pg.url;
      });
  await Promise.all([quickSetup(), postgres]);
}
