// Failure messages and stack traces go into an encoded attribute, so that the codec encrypts
// them like any payload: an SMTP refusal names the customer's address, for one. Bundled into the
// workflow code (bundleWorkflowCode's failureConverterPath), so it must stay free of Node built-ins.
import {
  ApplicationFailure,
  DefaultFailureConverter,
  type PayloadConverter,
  type ProtoFailure,
  type SerializationContext,
} from '@temporalio/common';
import { PLAINTEXT_REFUSED } from './plaintext';

class RefundFailureConverter extends DefaultFailureConverter {
  constructor() {
    super({ encodeCommonAttributes: true });
  }

  override errorToFailure(
    err: unknown,
    payloadConverter: PayloadConverter,
    context?: SerializationContext,
  ): ProtoFailure {
    // A refusal of plaintext goes to a caller without the codec: its fixed text stays readable, and holds nothing of theirs.
    if (err instanceof ApplicationFailure && err.type === PLAINTEXT_REFUSED && !err.cause)
      return { ...this.errorToFailureInner(err, payloadConverter, context), stackTrace: '' };
    return super.errorToFailure(err, payloadConverter, context);
  }
}

export const failureConverter = new RefundFailureConverter();
