// An activity's summary is user metadata the server caps at 400 bytes once encoded: with the longest ids the
// config allows (order ids, scopes, a 64-character key id), every summary still fits, encrypted, and says no address.
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { activitySummary, SUMMARY_MAX_CHARS } from '../../src/workflows/activity-summaries';
import { EncryptionCodec } from '../../src/codec/encryption-codec';
import { parseKeyring } from '../../src/codec/keyring';

const LIMIT = 400;
const order = `ord_${'x'.repeat(60)}`;
const operationId = `refund:${'s'.repeat(32)}:${order}:v99`;
const key = (step: string) => `${operationId}:${step}`;
const base = { orderId: order, operationId, amount: 123456789, currency: 'usd', refundId: `re_${'r'.repeat(24)}` };
const inputs: Record<string, unknown> = {
  createRefund: { ...base, paymentIntentId: `pi_${'p'.repeat(24)}`, idempotencyKey: key('create_refund') },
  applyRefund: { ...base, key: key('update_order') },
  revertRefund: { ...base, compensationKey: key('update_order:compensate') },
  sendRefundNotice: { ...base, key: key('notify_customer'), resendApprovedAt: '2026-12-02T00:00:00Z' },
  sendRefundCorrection: { ...base, key: key('notify_customer:compensate'), resendApprovedAt: '2026-12-02T00:00:00Z' },
  checkCompletion: { ...base, noticeKey: key('notify_customer') },
  reconcileRefund: { ...base, idempotencyKey: key('create_refund') },
  confirmNoticeDelivered: { by: 'customer-support@example.test', key: key('notify_customer') },
};

test.each(Object.keys(inputs))(
  '%s: its summary fits the server’s 400 bytes encrypted, and names no address',
  async (name) => {
    const text = activitySummary(name, [inputs[name]])!;
    expect(text.length).toBeLessThanOrEqual(SUMMARY_MAX_CHARS);
    expect(text).not.toContain('customer-support@example.test');
    const codec = new EncryptionCodec(
      parseKeyring(`${'k'.repeat(64)}:${Buffer.alloc(32, 7).toString('base64')}`, 'test'),
    );
    const [sealed] = await codec.encode([defaultPayloadConverter.toPayload(text) as Payload]);
    expect(temporal.api.common.v1.Payload.encode(sealed!).finish().length).toBeLessThanOrEqual(LIMIT);
  },
);
