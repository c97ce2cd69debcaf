// How payloads become values. Bundled into the workflow code (bundleWorkflowCode's
// payloadConverterPath), so it must stay free of Node built-ins.
//
// Anyone who may signal the namespace can send a payload nobody can decode (encrypted with a key no
// worker has, or json/plain that is not JSON). Thrown while the SDK decodes a Signal or an Update,
// before any handler runs, it would fail the workflow task on every retry and freeze the run. Inside
// a workflow, a payload of the workflow itself (its input, a Signal's, an Update's) that cannot be
// decoded therefore becomes an UndecodableValue, which every handler's schema ignores or refuses and
// every workflow refuses as input; so does one a worker refuses for being plaintext. Anywhere else
// (an activity's input, a client reading a result) and for an activity's result inside a workflow,
// it still throws: those payloads come from our own workers, a failure there is a misconfigured
// key, and a retry on a worker that has it is the cure.
import {
  DefaultPayloadConverter,
  METADATA_ENCODING_KEY,
  type ConverterHint,
  type Payload,
  type PayloadConverter,
  type SerializationContext,
} from '@temporalio/common';
import { inWorkflowContext } from '@temporalio/workflow';
import { PLAINTEXT_REFUSED_ENCODING } from './plaintext';

/** The encoding the payload codec gives a payload it could not decrypt; its data is why. */
export const UNDECODABLE_ENCODING = 'binary/undecodable';

/** What a workflow receives in place of a message it cannot decode. */
export interface UndecodableValue {
  $undecodable: string;
  /** Sent in plaintext to a worker that refuses plaintext (plaintext.ts); `$undecodable` says to use the codec endpoint. */
  $plaintext?: true;
}

export function isUndecodable(value: unknown): value is UndecodableValue {
  return (
    typeof value === 'object' && value !== null && typeof (value as Partial<UndecodableValue>).$undecodable === 'string'
  );
}

/** A value sent in plaintext that this worker refuses (PAYLOAD_PLAINTEXT=reject). */
export function isRefusedPlaintext(value: unknown): value is UndecodableValue & { $plaintext: true } {
  return isUndecodable(value) && value.$plaintext === true;
}

const text = (bytes: Uint8Array | null | undefined) => (bytes ? new TextDecoder().decode(bytes) : '');

class RefundPayloadConverter extends DefaultPayloadConverter {
  override fromPayload<T>(payload: Payload, context?: SerializationContext, hint?: ConverterHint<T>): T {
    const encoding = text(payload.metadata?.[METADATA_ENCODING_KEY]);
    const plaintext = encoding === PLAINTEXT_REFUSED_ENCODING;
    try {
      if (encoding === UNDECODABLE_ENCODING || plaintext) throw new Error(text(payload.data));
      return super.fromPayload<T>(payload, context, hint);
    } catch (err) {
      if (context?.type !== 'workflow' || !inWorkflowContext()) throw err;
      const why = err instanceof Error ? err.message : String(err);
      return { $undecodable: why, ...(plaintext && { $plaintext: true }) } satisfies UndecodableValue as T;
    }
  }
}

export const payloadConverter: PayloadConverter = new RefundPayloadConverter();
