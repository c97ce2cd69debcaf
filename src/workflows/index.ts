// The one entry the worker and the bundler load: every workflow function. What callers share with
// the workflows (messages, run state, results) is the contract's (src/contract/).
export * from './refund/workflow';
export * from './checkout/workflow';
export * from './batch';
export * from './digest';
export * from './sweep';
export * from './follow-up';
