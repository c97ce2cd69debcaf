// How payloads become values. Bundled into the workflow code (bundleWorkflowCode's
// payloadConverterPath), so it must stay free of Node built-ins.
//
// Anyone who may signal the namespace can send a payload nobody can decode (encrypted with a key no
// worker has, or json/plain that is not JSON). Thrown while the SDK decodes a Signal or an Update,
// before any handler runs, it would fail the workflow task on every retry and freeze the run. Inside
// a workflow, a payload of the workflow itself (its input, a Signal's, an Update's) that cannot be
// decoded therefore becomes an UndecodableValue, which every handler's schema ignores or refuses and
// every workflow refuses as input. Anywhere else (an activity's input, a client reading a result) and
// for an activity's result inside a workflow, it still throws: those payloads come from our own
// workers, a failure there is a misconfigured key, and a retry on a worker that has it is the cure.
import {
  DefaultPayloadConverter,
  METADATA_ENCODING_KEY,
  type ConverterHint,
  type Payload,
  type PayloadConverter,
  type SerializationContext,
} from '@temporalio/common';
import { inWorkflowContext } from '@temporalio/workflow';

/** The encoding the payload codec gives a payload it could not decrypt; its data is why. */
export const UNDECODABLE_ENCODING = 'binary/undecodable';

/** What a workflow receives in place of a message it cannot decode. */
export interface UndecodableValue {
  $undecodable: string;
}

export function isUndecodable(value: unknown): value is UndecodableValue {
  return (
    typeof value === 'object' && value !== null && typeof (value as Partial<UndecodableValue>).$undecodable === 'string'
  );
}

const text = (bytes: Uint8Array | null | undefined) => (bytes ? new TextDecoder().decode(bytes) : '');

class RefundPayloadConverter implements PayloadConverter {
  private readonly inner = new DefaultPayloadConverter();

  toPayload<T>(value: T, context?: SerializationContext, hint?: ConverterHint<T>): Payload {
    return this.inner.toPayload(value, context, hint);
  }

  fromPayload<T>(payload: Payload, context?: SerializationContext, hint?: ConverterHint<T>): T {
    try {
      if (text(payload.metadata?.[METADATA_ENCODING_KEY]) === UNDECODABLE_ENCODING) throw new Error(text(payload.data));
      return this.inner.fromPayload<T>(payload, context, hint);
    } catch (err) {
      if (context?.type !== 'workflow' || !inWorkflowContext()) throw err;
      return { $undecodable: err instanceof Error ? err.message : String(err) } satisfies UndecodableValue as T;
    }
  }
}

export const payloadConverter: PayloadConverter = new RefundPayloadConverter();
