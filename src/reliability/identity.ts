// Operation identity. An operation is the business intent (which order, which operation version,
// in which provider scope), never the workflow id: a run started by the `temporal` CLI, a
// Schedule or after retention under another workflow id is still the same operation, so it
// derives the same keys. Keys are derived in workflow code, never minted inside an activity,
// where a retry would mint another. Workflow code imports this module, so it stays pure.

/** Letters, digits, "_" and "-": safe inside keys, Message-IDs and metadata. */
export const SCOPE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** `refund:<scope>:<order>:v<n>`, e.g. `refund:local:ord_1:v1`. */
export function operationId(scope: string, orderId: string, operationVersion: number): string {
  return `refund:${scope}:${orderId}:v${operationVersion}`;
}

/** The idempotency key of one step of an operation. */
export function stepKey(operationId: string, step: string): string {
  return `${operationId}:${step}`;
}

/** A compensation is a new side effect with its own key, distinct from the step it undoes. */
export function compensationKey(forwardKey: string): string {
  return `${forwardKey}:compensate`;
}
