import type { RefundWorker } from '../../src/worker-pools';

/** Runs the pools until `work` settles, then stops them and returns its result. */
export async function runUntil<T>(worker: RefundWorker, work: Promise<T>): Promise<T> {
  const running = worker.run();
  try {
    return await Promise.race([
      work,
      running.then(() => Promise.reject(new Error('the workers stopped before the work was done'))),
    ]);
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
  }
}
