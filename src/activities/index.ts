import type Stripe from 'stripe';
import type { Transporter } from 'nodemailer';
import type { OrderStore } from '../store/types';
import { createPaymentActivities } from './payments';
import { createOrderActivities } from './orders';
import { createNotificationActivities } from './notifications';

export interface ActivityDeps {
  stripe: Stripe;
  store: OrderStore;
  mail: Transporter;
  mailFrom: string;
}

export function createActivities(deps: ActivityDeps) {
  return {
    ...createPaymentActivities(deps.stripe),
    ...createOrderActivities(deps.store),
    ...createNotificationActivities({ transport: deps.mail, store: deps.store, from: deps.mailFrom }),
  };
}

export type RefundActivities = ReturnType<typeof createActivities>;
