// The run's page in the Web UI tells its story: a parked run's static summary, its activities'
// summaries and its current details (inspect's verdict, next action and decide command), read in a
// real browser (Debian's Chromium) through the harness's codec server, as an operator reads them.
import { randomUUID } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startRefund } from '../../src/client/refunds';
import { decideCommand, decisionUpdate, messageIdForKey } from '../../src/contract';
import { inspectRun } from '../../src/inspect/inspection';
import { findTool } from '../../tools/src/stack/tools';
import { completed, startHarness, stopped, type Harness } from '../helpers/harness';

let h: Harness;
let browser: Browser;
beforeAll(async () => {
  h = await startHarness({ webUi: true });
  browser = await chromium.launch({ executablePath: findTool('chromium'), args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
});

/**
 * The run's User Metadata tab, as text, once it shows all of `wanted`: the summary, the details and the
 * current details are markdown the UI renders each in a frame of its own, so every frame is read; the
 * events' summaries are decoded apart, and may show a moment after the details.
 */
async function userMetadata(page: Page, workflowId: string, ...wanted: RegExp[]): Promise<string> {
  await page.goto(`${h.webUiUrl}/namespaces/default/workflows/${workflowId}`);
  await page.getByText('User Metadata').click();
  let text = '';
  for (let i = 0; i < 100 && !wanted.every((w) => w.test(text)); i++) {
    await page.waitForTimeout(200);
    const frames = await Promise.all(
      page.frames().map((f) =>
        f
          .locator('body')
          .innerText()
          .catch(() => ''),
      ),
    );
    text = frames.join('\n');
  }
  return text;
}

test('a parked run: its summary, its activities and what inspect says, on its page; decided, the page follows', async () => {
  const orderId = `ord_${randomUUID().slice(0, 8)}`;
  const order = await h.seedOrder(orderId);
  // Every attempt of the order update meets a competing writer: the run parks at update_order, auto-retry is safe.
  await h.storeFault('conflict', order.id, 5);
  const request = { orderId, amount: 1250, currency: 'usd', requestedBy: 'test' };
  const { handle, workflowId } = await startRefund(h.env.client, request);
  expect((await stopped(handle)).status).toBe('needs_attention');
  const operation = `refund:test:${orderId}:v1`;
  const inspected = await inspectRun(h.env.client, h.sources, 'test', workflowId);
  expect(inspected.decision).toBe('retry-step:update_order');

  const page = await browser.newPage();
  const decodes: number[] = [];
  page.on('response', (res) => {
    if (res.url().startsWith(h.codecUrl)) decodes.push(res.status());
  });
  const parked = await userMetadata(page, workflowId, /Decide:/, /at Stripe, idempotency key/, /record refund re_/);
  // Its static summary and details, as startRefund set them.
  expect(parked).toContain(`Refund 1250 usd on order ${orderId}, operation v1`);
  expect(parked).toContain(`Order ${orderId}: refund 1250 usd (minor units), reason requested_by_customer`);
  expect(parked).toContain(`npm run inspect -- ${workflowId}`);
  // Each activity: what it sent, to whom, under which key.
  expect(parked).toContain(
    `refund 1250 usd of ${order.paymentIntentId} at Stripe, idempotency key ${operation}:create_refund`,
  );
  expect(parked).toMatch(
    new RegExp(`record refund re_\\w+ \\(1250\\) on order ${orderId}, key ${operation}:update_order`),
  );
  // What inspect says: the same verdict, next action, who may decide and decide command.
  expect(parked).toContain(`needs_attention at update_order: update_order failed with STATE_CONFLICT`);
  expect(parked).toContain(`Verdict: ${inspected.verdict}`);
  expect(parked).toContain(`Next action: ${inspected.nextAction}`);
  expect(parked).toContain(`Who may decide: ${inspected.decidedBy.join(', ')}`);
  expect(parked).toContain(`Decide: ${decideCommand(workflowId, inspected.decision!, inspected.address)}`);
  expect(parked).toContain(`--answers ${inspected.address}`);
  expect(parked).toContain(`operation ${operation}`);
  // All of it is encrypted in Temporal (the summaries in history too): the browser read it through the codec server.
  const summaries = ((await handle.fetchHistory()).events ?? []).flatMap((e) => e.userMetadata?.summary ?? []);
  expect(summaries.length).toBeGreaterThanOrEqual(5);
  for (const p of summaries) expect(Buffer.from(p.metadata!.encoding!).toString()).toBe('binary/encrypted');
  expect(decodes.length).toBeGreaterThan(0);
  expect(decodes.every((status) => status === 200)).toBe(true);

  await handle.executeUpdate(decisionUpdate, {
    args: [{ decision: 'retry-step', by: 'ops', reason: 'the competing writer is gone' }],
  });
  const result = completed(await handle.result());
  const done = await userMetadata(page, workflowId, /Next action: none/, /email the refund notice/);
  expect(done).toMatch(/^completed: every check of the completion gate passed$/m);
  expect(done).toContain('Verdict: auto-retry is safe');
  expect(done).toContain('Next action: none: every effect is confirmed');
  expect(done).not.toContain('Decide:');
  expect(done).toContain(
    `email the refund notice (1250 usd, ${result.refund.refundId}) to the customer of order ${orderId}, Message-ID ${messageIdForKey(`${operation}:notify_customer`)}`,
  );
  expect(done).not.toContain(order.customerEmail);
});
