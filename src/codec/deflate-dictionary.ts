// The preset dictionary payloads are deflated against: the field names and phrases our payloads repeat,
// so that a payload of a few hundred bytes shrinks as a long one would. Deflate reads it back byte for
// byte: once a history holds a payload deflated with it, it must never change. A new dictionary
// needs a marker of its own (encryption-codec.ts). Later bytes are nearer, so cheaper: the commonest go last.
const FRAGMENTS = [
  // Summaries and details shown in the Web UI.
  'Order : refund  usd (minor units), reason requested_by_customer\n\nOperation version 1, requested by ',
  "\n\nWhat it did and what it needs: `npm run inspect -- refund-'s items in stock, key checkout:",
  'load order  and commit the intent of operation v1 (usd)completion gate: read refund  at Stripe, order  and the notice  (sends nothing)',
  'email the refund notice ( usd, re_) to the customer of order , Message-ID <refund.',
  'refund  usd of pi_ at Stripe, idempotency key refund:charge cart  at Stripe with pm_card_visa, idempotency key ',
  'email the receipt ( usd) to the customer of cart , Message-ID <checkout.',
  // The checkout saga.
  '{"cartId":"cart_","paymentMethod":"pm_card_visa","declineCode":null,"charge":{"workflowId":"checkout-cart_',
  ':reserve_stock",":charge_card",":send_receipt","operationId":"checkout:cart_',
  // Loading the order and the operation's intent: its local activity's marker, a pinned policy's changes.
  '{"seq":1,"attempt":1,"activity_id":"1","activity_type":"beginOperation","complete_time":{"seconds":,"nanos":},"backoff":null,"original_schedule_time":{"seconds":',
  '{"rules":[{"code":"RATE_LIMIT","certainty":"*","boundary":"*","action":"retry","owner":"dependency_adapter","maxAttempts":5,"backoff":{"initialMs":200,"coefficient":2,"maxMs":2000},"jitter":0.2,"note":"',
  '"timeouts":{"stripe":{"startToCloseMs":5000,"scheduleToCloseMs":60000},"smtp":{"startToCloseMs":10000,"scheduleToCloseMs":60000},"store":{',
  '"settings":{"scope":"","provider":{"dedupeWindowMs":86400000,"consistencyMs":300,"requestTimeoutMs":2000},"policyBase":"","policyChanges":{}}',
  '"created":true,"problem":null,"blockers":[],"customerEmail":"***@","refundedAmount":0,"status":"paid"',
  '{"order":{"id":"ord_","operation":{"operationId":"refund:","operationVersion":1,"scope":"","requestHash":"',
  '"status":"intent","firstSentAt":null,"lastSentAt":null,"requestsSent":0,"absenceConfirmedAt":null,"provenAbsentThrough":null,',
  '"createdAt":"","createdBy":"refund-ord_","updatedAt":"","offTheWireBy":null,"refund":null,',
  '{"orderId":"ord_","amount":,"currency":"usd","reason":"requested_by_customer","requestedBy":"","operationVersion":1}',
  // The completion gate.
  '"read":{"completion_gate":{"output":{"verdict":"pass","otherRefundIds":[],"findings":[',
  '{"check":"provider_receipt","ok":true,"observed":"refund : succeeded,  usd, operation refund:"},',
  `{"check":"single_refund","ok":true,"observed":"1 refund(s) with this operation id in the provider's list: re_"},`,
  '{"check":"order_refund_state","ok":true,"observed":"order ord_ records re_ for "},',
  '{"check":"notification_state","ok":true,"observed":"notice <refund. is sent"},',
  '{"check":"audit_trail","ok":true,"observed":"5 audit entries, none missing"}],',
  // The refund, the order's update, the notice.
  '"carried":{"update_order":{"input":{"key":"refund:","output":{"status":"partially_refunded","refundedAmount":,"version":2,"changed":true,',
  '"notification":{"key":"refund:"messageId":"<refund.:v1:notify_customer@durable-refunds.local>","recipient":"***@",',
  '"providerResponse":"250 OK: stored as message ","alreadySent":false,',
  '{"workflowId":"refund-ord_","orderId":"ord_","operationId":"refund:","status":"completed","refund":{"refundId":"re_',
  '"paymentIntentId":"pi_","idempotencyKey":"refund:","carry":["update_order"]',
  '"refundId":"re_","paymentIntentId":"pi_","amount":,"currency":"usd","status":"succeeded","created":,"operationId":"refund:","replayed":false,',
  // Every step's evidence.
  '"evidence":{"attempt":1,"ledger":[{"attempt":1,"startedAt":"2026-12-01T00:00:00.000Z","finishedAt":"2026-12-01T00:00:00.000Z",',
  '"transportRequests":1,"outcome":"ok","certainty":"completed","reason":null,"retryAfterMs":null,"nextDelayMs":null,"providerRequestId":"req_',
  '"transportRequests":0,"outcome":"ok","certainty":"completed","reason":null,"retryAfterMs":null,"nextDelayMs":null,"providerRequestId":null}]}}',
  // Every payload's own encoding.
  '\x0a\x16\x0a\x08encoding\x12\x0ajson/plain\x12',
];

export const DEFLATE_DICTIONARY_1 = Buffer.from(FRAGMENTS.join(''), 'utf8');
