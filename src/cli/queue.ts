// `npm run queue -- import <file.csv> | list`: refund requests queued for the batch schedule.
import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { loadConfig } from '../config';
import { CsvFileError, importCsv } from '../queue/csv-import';
import { exitOnError, withStore } from './common';

const config = loadConfig();

const program = new Command('queue')
  .description('Refund requests waiting for the batch schedule (npm run schedule -- describe refund-batch).')
  .showHelpAfterError();

program
  .command('import')
  .argument('<file>', 'CSV with a header: order_id,amount[,currency,reason,requested_by,operation_version]')
  .option('--requested-by <who>', 'who asked, for rows without requested_by (default: $USER)')
  .option('--json', 'print the row-by-row report as JSON')
  .description('queue every good row; report each bad one by line and field (exit 3 when any was refused)')
  .action((file: string, opts: { requestedBy?: string; json?: boolean }) =>
    withStore(config, async (store) => {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (err) {
        throw new CsvFileError(`cannot read ${file}: ${(err as Error).message}`);
      }
      const report = await importCsv(store, text, {
        source: path.basename(file),
        requestedBy: opts.requestedBy ?? process.env.USER,
      });
      const refused = report.filter((r) => r.status === 'refused').length;
      if (refused) process.exitCode = 3;
      if (opts.json)
        return console.log(JSON.stringify({ file, accepted: report.length - refused, refused, rows: report }, null, 2));
      for (const r of report) {
        if (r.status === 'refused')
          console.log(`line ${r.line}: refused: ${r.problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`);
        else
          console.log(
            `line ${r.line}: ${r.status}: order ${r.orderId} v${r.operationVersion} (request #${r.requestId})`,
          );
      }
      console.log(
        `${report.length - refused} row(s) accepted, ${refused} refused; the refund-batch schedule starts queued requests`,
      );
    }),
  );

program
  .command('list')
  .addOption(new Option('--status <status>', 'only these').choices(['queued', 'started', 'refused']))
  .option('--json', 'print JSON')
  .description('queued and started requests, oldest first')
  .action((opts: { status?: 'queued' | 'started' | 'refused'; json?: boolean }) =>
    withStore(config, async (store) => {
      const all = await store.queue.list(opts.status ? { status: opts.status } : {});
      if (opts.json) return console.log(JSON.stringify(all, null, 2));
      if (!all.length) return console.log('the queue is empty');
      for (const q of all) {
        const { orderId, amount, currency, operationVersion } = q.request;
        const where =
          q.status === 'started'
            ? `started ${q.workflowId} by ${q.startedBy}`
            : q.status === 'refused'
              ? `refused: ${q.lastError}`
              : `queued${q.lastError ? `; last try: ${q.lastError}` : ''}`;
        console.log(`#${q.id} order ${orderId} v${operationVersion} ${amount} ${currency} (${q.source}): ${where}`);
      }
    }),
  );

exitOnError('queue', program.parseAsync(), (err) => (err instanceof CsvFileError ? 2 : undefined));
