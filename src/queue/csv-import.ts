// Bulk import of refund requests from CSV into the queue, row by row (docs/schedules.md gives the columns
// and their defaults): a good row is queued (or found queued), a bad one is refused with its line and field.
import { parse } from 'csv-parse/sync';
import { refundRequestSchema, type RefundRequest } from '../domain/refund-request';
import type { Order } from '../domain/order';
import { IntentConflictError, type OrderStore } from '../store';

// Each column is the request's field of the same name in snake_case.
const COLUMNS = ['order_id', 'amount', 'currency', 'reason', 'requested_by', 'operation_version'];
const columnOf = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

type Problems = { field: string; message: string }[];
type Queued = { status: 'queued' | 'already queued'; orderId: string; operationVersion: number; requestId: number };
type RowReport = { line: number } & (Queued | { status: 'refused'; problems: Problems });

export class CsvFileError extends Error {}

const CSV_OPTIONS = { skip_empty_lines: true, trim: true, bom: true, info: true, relax_column_count: true };

type Row = { line: number; record: Record<string, string> } | { line: number; fields: number; expected: number };

/** Reads the file's rows; a file that is not CSV, or lacks the required columns, is refused whole. A row with the wrong number of fields is refused alone. */
function rows(text: string): Row[] {
  let parsed: { record: string[]; info: { lines: number } }[];
  try {
    parsed = parse(text, CSV_OPTIONS) as unknown as typeof parsed;
  } catch (err) {
    throw new CsvFileError(`not readable as CSV: ${(err as Error).message}`);
  }
  const [head, ...body] = parsed;
  const header = (head?.record ?? []).map((h) => h.toLowerCase());
  const unknown = header.filter((h) => !COLUMNS.includes(h));
  if (unknown.length)
    throw new CsvFileError(`unknown column(s) ${unknown.join(', ')}; the columns are ${COLUMNS.join(', ')}`);
  if (!header.includes('order_id') || !header.includes('amount'))
    throw new CsvFileError('the header must name order_id and amount');
  return body.map(({ record, info }) =>
    record.length === header.length
      ? { line: info.lines, record: Object.fromEntries(header.map((h, i) => [h, record[i] ?? ''])) }
      : { line: info.lines, fields: record.length, expected: header.length },
  );
}

/** Why a request cannot be refunded from its order: no such order, another currency, more than is left once what is already queued for it is counted. */
export async function refusalsAgainstOrder(
  store: OrderStore,
  request: RefundRequest,
  known?: Order,
): Promise<Problems> {
  const order = known ?? (await store.getOrder(request.orderId));
  if (!order) return [{ field: 'order_id', message: `no order ${request.orderId} in the store` }];
  const waiting = (await store.queue.list({ status: 'queued', orderId: order.id }))
    .filter((q) => q.request.operationVersion !== request.operationVersion)
    .reduce((sum, q) => sum + q.request.amount, 0);
  const left = order.amount - order.refundedAmount - waiting;
  const problems: Problems = [];
  if (request.currency !== order.currency)
    problems.push({ field: 'currency', message: `the order is in ${order.currency}` });
  if (request.amount > left) {
    const counted = waiting ? ` once the ${waiting} already queued is counted` : '';
    const message = `more than the ${left} ${order.currency} left to refund on order ${order.id}${counted}`;
    problems.push({ field: 'amount', message });
  }
  return problems;
}

async function importRow(
  store: OrderStore,
  record: Record<string, string>,
  line: number,
  opts: { source: string; requestedBy?: string },
): Promise<Problems | Queued> {
  // An empty cell is a missing value; any other must be digits.
  const notWhole = (['amount', 'operation_version'] as const).filter((c) => record[c] && !/^\d+$/.test(record[c]));
  if (notWhole.length)
    return notWhole.map((c) => ({
      field: c,
      message: `must be a whole number${c === 'amount' ? ' of minor units (1250 for 12.50)' : ''}, got "${record[c]}"`,
    }));
  const order = record.order_id ? await store.getOrder(record.order_id) : undefined;
  const parsed = refundRequestSchema.safeParse({
    orderId: record.order_id,
    amount: record.amount ? Number(record.amount) : null,
    currency: record.currency || order?.currency || '',
    ...(record.reason && { reason: record.reason }),
    requestedBy: record.requested_by || opts.requestedBy || '',
    ...(record.operation_version && { operationVersion: Number(record.operation_version) }),
  });
  if (!parsed.success)
    return parsed.error.issues.map((i) => ({ field: columnOf(String(i.path[0])), message: i.message }));
  const request: RefundRequest = parsed.data;
  const problems = await refusalsAgainstOrder(store, request, order);
  if (problems.length) return problems;
  try {
    const { queued, created } = await store.queue.enqueue(request, `${opts.source}:${line}`);
    const { orderId, operationVersion } = request;
    return { status: created ? 'queued' : 'already queued', orderId, operationVersion, requestId: queued.id };
  } catch (err) {
    if (!(err instanceof IntentConflictError)) throw err;
    return [{ field: 'operation_version', message: err.message }];
  }
}

export async function importCsv(
  store: OrderStore,
  text: string,
  opts: { source: string; requestedBy?: string },
): Promise<RowReport[]> {
  const report: RowReport[] = [];
  for (const row of rows(text)) {
    const { line } = row;
    const refuse = (problems: Problems) => report.push({ line, status: 'refused', problems });
    if (!('record' in row)) {
      refuse([{ field: '(row)', message: `has ${row.fields} field(s); the header has ${row.expected}` }]);
      continue;
    }
    try {
      const outcome = await importRow(store, row.record, line, opts);
      if (Array.isArray(outcome)) refuse(outcome);
      else report.push({ line, ...outcome });
    } catch (err) {
      // The store failed on this row: it is not queued, and the rows after it are still tried.
      refuse([{ field: '(store)', message: (err as Error).message }]);
    }
  }
  return report;
}
