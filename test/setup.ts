import { DefaultLogger, Runtime } from '@temporalio/worker';

// Tests fail runs on purpose; the worker would log each one. Their assertions say what matters.
Runtime.install({
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
});
