// A refund request as the business states it: which order, how much, why, who asked, and which
// operation version. Parsed the same way wherever one enters (CLI, CSV queue, a run's input).
import { z } from 'zod';
import { InvalidInputError, parseInput } from './zod-problems';

export const REFUND_REASONS = ['requested_by_customer', 'duplicate', 'fraudulent'] as const;

const idPattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const refundRequestSchema = z
  .object({
    orderId: z.string().regex(idPattern, 'must be 1-64 letters, digits, "_" or "-", starting with a letter or digit'),
    amount: z
      .number()
      .int('must be a whole number of minor units (e.g. cents)')
      .positive('must be greater than 0')
      .max(99_999_999),
    // "EUR" and "eur" are one currency: normalized, never refused for its case.
    currency: z
      .string()
      .trim()
      .toLowerCase()
      .regex(/^[a-z]{3}$/, 'must be a three-letter ISO code such as "usd"'),
    reason: z.enum(REFUND_REASONS).default('requested_by_customer'),
    requestedBy: z.string().trim().min(1, 'must name who asked for the refund').max(200),
    /** A changed intent for the same order is a new operation version, never a disguised retry. */
    operationVersion: z.number().int().positive().max(1000).default(1),
  })
  .strict();

export type RefundRequest = z.output<typeof refundRequestSchema>;
export type RefundRequestInput = z.input<typeof refundRequestSchema>;

/** Parses a refund request, throwing an error that names every bad field. Changes nothing. */
export const parseRefundRequest = (input: unknown): RefundRequest =>
  parseInput(refundRequestSchema, input, 'refund request', '(request)', InvalidRefundRequestError);

/**
 * How `existing` differs from `request` in what the refund is (amount, currency, reason), as
 * `existing` has it: "amount 900, reason duplicate"; undefined when they are the same intent.
 */
export function changedIntent(existing: RefundRequest, request: RefundRequest): string | undefined {
  const differs = (['amount', 'currency', 'reason'] as const).filter((f) => existing[f] !== request[f]);
  return differs.length ? differs.map((f) => `${f} ${existing[f]}`).join(', ') : undefined;
}

export class InvalidRefundRequestError extends InvalidInputError {
  override name = 'InvalidRefundRequestError';
}
