// Operation identity. Keys are derived in workflow code from durable facts only (the workflow
// id, the step and the operation version), so every retry, replay or redelivery of a step
// sends the same key; an activity never mints one, since its retry would mint another.

export function stepKey(workflowId: string, step: string, operationVersion: number): string {
  return `${workflowId}:${step}:v${operationVersion}`;
}

/** A compensation is a new side effect with its own key, distinct from the step it undoes. */
export function compensationKey(forwardKey: string): string {
  return `${forwardKey}:compensate`;
}
