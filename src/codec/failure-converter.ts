// Failure messages and stack traces go into an encoded attribute, so that the codec encrypts
// them like any payload: an SMTP refusal names the customer's address, for one. Bundled into the
// workflow code (bundleWorkflowCode's failureConverterPath), so it must stay free of Node built-ins.
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
