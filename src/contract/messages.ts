// The messages a run takes from outside, by name: the `steps` and `followUp` Queries, the
// `providerEvent` Signal and the `decide` Update. Defining one needs no workflow code, so clients
// and activities use these same definitions; the runs set their handlers (src/workflows/).
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { DecisionInput, DecisionRecord } from './decision';
import type { FollowUpState } from './follow-up';
import type { ProviderEventSummary } from './provider-event';
import type { RefundRunState } from './run-state';

export const stepsQuery = defineQuery<RefundRunState>('steps');
export const followUpQuery = defineQuery<FollowUpState>('followUp');
export const providerEventSignal = defineSignal<[ProviderEventSummary]>('providerEvent');
export const decisionUpdate = defineUpdate<DecisionRecord, [DecisionInput]>('decide');
