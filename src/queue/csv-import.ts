// Bulk import of refund requests from CSV into the queue, row by row: a good row is queued (or
// found already queued), a bad one is refused with its line and field, and changes nothing.
//
//   order_id,amount,currency,reason,requested_by,operation_version
//   ord_1,1250,usd,requested_by_customer,alice,1
//
// order_id and amount are required; currency defaults to the order's, reason to
// requested_by_customer, operation_version to 1, requested_by to the importer's --requested-by.
import { parse } from 'csv-parse/sync';
import { refundRequestSchema, type RefundRequest } from '../shared';
import { IntentConflictError, type OrderStore } from '../store';

const COLUMNS = { order_id: 'orderId', amount: 'amount', currency: 'currency', reason: 'reason', requested_by: 'requestedBy', operation_version: 'operationVersion' } as const;
type Column = keyof typeof COLUMNS;
const FIELD_TO_COLUMN = Object.fromEntries(Object.entries(COLUMNS).map(([c, f]) => [f, c])) as Record<string, Column>;

export type RowReport =
  | { line: number; status: 'queued' | 'already queued'; orderId: string; operationVersion: number; requestId: number }
  | { line: number; status: 'refused'; problems: { field: string; message: string }[] };

export class CsvFileError extends Error {}

const wholeNumber = (v: string | undefined) => (v === undefined || v === '' ? undefined : /^\d+$/.test(v) ? Number(v) : Number.NaN);

/** Reads the file's rows; a file that is not CSV, or lacks the required columns, is refused whole. */
function rows(text: string): { line: number; record: Record<string, string> }[] {
  let parsed: { record: Record<string, string>; info: { lines: number } }[];
  try {
    parsed = parse(text, { columns: (header: string[]) => header.map((h) => h.trim().toLowerCase()), skip_empty_lines: true, trim: true, bom: true, info: true });
  } catch (err) {
    throw new CsvFileError(`not readable as CSV: ${(err as Error).message}`);
  }
  const header = parsed[0] ? Object.keys(parsed[0].record) : [];
  const unknown = header.filter((h) => !(h in COLUMNS));
  if (unknown.length) throw new CsvFileError(`unknown column(s) ${unknown.join(', ')}; the columns are ${Object.keys(COLUMNS).join(', ')}`);
  if (parsed.length && (!header.includes('order_id') || !header.includes('amount'))) throw new CsvFileError('the header must name order_id and amount');
  return parsed.map((p) => ({ line: p.info.lines, record: p.record }));
}

export async function importCsv(store: OrderStore, text: string, opts: { source: string; requestedBy?: string }): Promise<RowReport[]> {
  const report: RowReport[] = [];
  for (const { line, record } of rows(text)) {
    const refuse = (problems: { field: string; message: string }[]) => report.push({ line, status: 'refused', problems });
    const amount = wholeNumber(record.amount);
    const operationVersion = wholeNumber(record.operation_version);
    const notWhole = (['amount', 'operation_version'] as const).filter((c) => Number.isNaN(c === 'amount' ? amount : operationVersion));
    if (notWhole.length) {
      refuse(notWhole.map((c) => ({ field: c, message: `must be a whole number${c === 'amount' ? ' of minor units (1250 for 12.50)' : ''}, got "${record[c]}"` })));
      continue;
    }
    const order = record.order_id ? await store.getOrder(record.order_id) : undefined;
    const parsed = refundRequestSchema.safeParse({
      orderId: record.order_id,
      amount: amount ?? null,
      currency: record.currency || order?.currency || '',
      ...(record.reason && { reason: record.reason }),
      requestedBy: record.requested_by || opts.requestedBy || '',
      ...(operationVersion !== undefined && { operationVersion }),
    });
    if (!parsed.success) {
      refuse(parsed.error.issues.map((i) => ({ field: FIELD_TO_COLUMN[String(i.path[0])] ?? String(i.path[0]), message: i.message })));
      continue;
    }
    const request: RefundRequest = parsed.data;
    if (!order) {
      refuse([{ field: 'order_id', message: `no order ${request.orderId} in the store` }]);
      continue;
    }
    const left = order.amount - order.refundedAmount;
    const problems = [
      ...(request.currency !== order.currency ? [{ field: 'currency', message: `the order is in ${order.currency}` }] : []),
      ...(request.amount > left ? [{ field: 'amount', message: `more than the ${left} ${order.currency} left to refund on order ${order.id}` }] : []),
    ];
    if (problems.length) {
      refuse(problems);
      continue;
    }
    try {
      const { queued, created } = await store.queue.enqueue(request, `${opts.source}:${line}`);
      report.push({ line, status: created ? 'queued' : 'already queued', orderId: request.orderId, operationVersion: request.operationVersion, requestId: queued.id });
    } catch (err) {
      if (!(err instanceof IntentConflictError)) throw err;
      refuse([{ field: 'operation_version', message: err.message }]);
    }
  }
  return report;
}
