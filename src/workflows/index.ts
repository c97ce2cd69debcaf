// The one entry the worker and the bundler load: every workflow function, and what callers share with them.
export * from './refund/workflow';
export { decideUpdate, SWEEPER, type Chosen, type DecisionInput, type DecisionRecord } from './refund/decision-desk';
export type { AwaitingProvider, CompletedRefund, EffectStatus, EndedRefund, RefundResult, RefundRunState, RunStatus, TerminalStatus } from './refund/state';
export { MAX_RESUBMISSIONS } from './refund/refund-effect';
export * from './batch';
export * from './digest';
export * from './sweep';
export * from './provider-events';
export * from './follow-up';
