// Each saga's steps by name: part of every step key, of the `decide` Update's input and of the
// run's state. What each step does is its definition's (the refund's src/compensations/registry.ts).

export const REFUND_STEPS = [
  'load_order',
  'create_refund',
  'update_order',
  'notify_customer',
  'completion_gate',
] as const;
export type RefundStep = (typeof REFUND_STEPS)[number];

export const CHECKOUT_STEPS = ['reserve_stock', 'charge_card', 'send_receipt'] as const;
export type CheckoutStep = (typeof CHECKOUT_STEPS)[number];

/** A step of any saga, as a decision may name it (the run refuses one that is not where it parked). */
export const SAGA_STEPS = [...REFUND_STEPS, ...CHECKOUT_STEPS] as const;
export type SagaStep = (typeof SAGA_STEPS)[number];
