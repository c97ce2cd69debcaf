// The drain's signals: the first starts it, the same stop delivered twice is still one drain, and an
// operator's later second signal ends the process at once.
import { DefaultLogger } from '@temporalio/worker';
import { Drain, REPEAT_WINDOW_MS } from '../../src/lifecycle/drain';

test('a second signal within the repeat window is the same stop; one after it exits at once', () => {
  const exit = jest.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
  let now = 1_000_000;
  const clock = jest.spyOn(Date, 'now').mockImplementation(() => now);
  try {
    const drain = new Drain(new DefaultLogger('ERROR'), 30_000);
    let stops = 0;
    drain.stopWith(() => stops++);
    drain.listen(['SIGUSR2']);
    expect(drain.check()).toBe('not draining');

    process.emit('SIGUSR2', 'SIGUSR2');
    expect(drain.draining).toBe(true);
    expect(stops).toBe(1);
    expect(() => drain.check()).toThrow(/draining since SIGUSR2/);

    now += REPEAT_WINDOW_MS - 1;
    process.emit('SIGUSR2', 'SIGUSR2');
    expect(exit).not.toHaveBeenCalled();
    expect(stops).toBe(1);

    now += 2;
    process.emit('SIGUSR2', 'SIGUSR2');
    expect(exit).toHaveBeenCalledWith(1);
  } finally {
    process.removeAllListeners('SIGUSR2');
    clock.mockRestore();
    exit.mockRestore();
  }
});
