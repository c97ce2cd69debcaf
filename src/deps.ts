// The real clients the activities are built from, opened from config and closed together.
import { createActivities, type RefundActivities } from './activities';
import { createStripeClient } from './activities/payments';
import { createMailTransport } from './activities/notifications';
import type { Config } from './config';
import { openStore } from './store';
import type { OrderStore } from './store/types';

export interface Deps {
  activities: RefundActivities;
  store: OrderStore;
  close(): Promise<void>;
}

export function openDeps(config: Config): Deps {
  const store = openStore(config.databaseUrl);
  const mail = createMailTransport(config.mail.smtpUrl);
  const stripe = createStripeClient(config.stripe);
  return {
    activities: createActivities({ stripe, store, mail, mailFrom: config.mail.from }),
    store,
    async close() {
      mail.close();
      await store.close();
    },
  };
}
