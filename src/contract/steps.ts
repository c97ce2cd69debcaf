// The refund saga's steps by name: part of every step key, of the `decide` Update's input and of
// the run's state. What each step does is the registry's (src/compensations/registry.ts).

export const REFUND_STEPS = [
  'load_order',
  'create_refund',
  'update_order',
  'notify_customer',
  'completion_gate',
] as const;
export type RefundStep = (typeof REFUND_STEPS)[number];
