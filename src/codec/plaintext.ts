// Plaintext refused (PAYLOAD_PLAINTEXT=reject): a workflow's own payload (its input, a Signal's, an
// Update's, a Query's argument) that did not come through the codec. The codec marks it (data-converter.ts),
// the payload converter hands it to the workflow as a refused value, and the workflow refuses it.
// Bundled into the workflow code: free of Node built-ins.

/** The encoding the codec gives a plaintext payload it refuses; its data is the refusal's message. */
export const PLAINTEXT_REFUSED_ENCODING = 'binary/plaintext-refused';

/** The failure type of a refusal: its message stays in the clear (failure-converter.ts), for a caller without the codec. */
export const PLAINTEXT_REFUSED = 'PLAINTEXT_REFUSED';

/** What the caller is told: what happened, and the one way to send that is accepted. */
export function plaintextRefusal(codecEndpoint: string): string {
  return (
    'plaintext payload refused (PAYLOAD_PLAINTEXT=reject): this namespace takes only payloads encrypted by its codec; ' +
    `send through the codec endpoint (temporal … --codec-endpoint ${codecEndpoint}, or TEMPORAL_CODEC_ENDPOINT) or this project's CLIs`
  );
}
