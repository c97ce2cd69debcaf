// What the product knows of the local stack (tools/src/stack): the pid files it keeps under
// DATA_DIR/run. The stack writes them; a worker or client reads the Temporal dev server's to know
// that the server it talks to is the stack's own, which may use the stack's payload key file.
import fs from 'node:fs';
import path from 'node:path';

export const runDir = (dataDir: string) => path.join(dataDir, 'run');
export const pidFile = (dataDir: string, name: string) => path.join(runDir(dataDir), `${name}.pid`);

/** The pid of a process the stack started and that is still alive, or undefined. */
export function runningPid(dataDir: string, name: string): number | undefined {
  try {
    const record = JSON.parse(fs.readFileSync(pidFile(dataDir, name), 'utf8')) as { pid: number; command: string };
    // A recycled pid belongs to someone else: check it still runs our command.
    const cmdline = fs.readFileSync(`/proc/${record.pid}/cmdline`, 'utf8').split('\0').join(' ');
    return cmdline.includes(record.command) ? record.pid : undefined;
  } catch {
    return undefined;
  }
}
