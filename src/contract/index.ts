// What both sides of Temporal share: the workers' workflows and activities, and the clients
// (CLI, webhooks, inspect). Imports only domain and reliability code, and nothing of Node: the
// workflow bundle loads it.
export * from './carriage';
export * from './checkout';
export * from './decision';
export * from './decision-signature';
export * from './follow-up';
export * from './ids';
export * from './messages';
export * from './provider-event';
export * from './queues';
export * from './receipts';
export * from './results';
export * from './run-summary';
export * from './run-state';
export * from './search-attributes';
export * from './steps';
