// The chaos stack's Toxiproxy keeps working when toxiproxy-server itself dies: it is started
// again on the same port with the same proxies, and the crash is recorded.
import net from 'node:net';
import { startToxiproxy, type Toxiproxy } from '../../tools/src/chaos/toxiproxy';

let echo: net.Server;
let toxiproxy: Toxiproxy;

beforeAll(async () => {
  echo = net.createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  toxiproxy = await startToxiproxy();
});

afterAll(async () => {
  await toxiproxy?.close();
  echo.close();
});

function roundTrip(listen: string): Promise<string> {
  const [host, port] = listen.split(':');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port: Number(port) }, () => socket.write('ping'));
    socket.setTimeout(3000, () => socket.destroy(new Error('no answer')));
    socket.once('data', (d) => {
      resolve(d.toString());
      socket.end();
    });
    socket.once('error', reject);
  });
}

test('a killed toxiproxy-server comes back with its proxies on the same ports, and the crash is on record', async () => {
  const { port } = echo.address() as net.AddressInfo;
  const proxy = await toxiproxy.proxy('echo', `127.0.0.1:${port}`);
  await expect(roundTrip(proxy.listen)).resolves.toBe('ping');

  const first = toxiproxy.pid!;
  process.kill(first, 'SIGKILL');
  for (let i = 0; i < 100 && toxiproxy.pid === first; i++) await new Promise((r) => setTimeout(r, 50));
  // The next API call waits for the restart; the proxy answers on its old port again.
  await toxiproxy.setEnabled('echo', true);
  expect(toxiproxy.pid).not.toBe(first);
  await expect(roundTrip(proxy.listen)).resolves.toBe('ping');
  expect(toxiproxy.crashes).toEqual([expect.objectContaining({ signal: 'SIGKILL', code: null })]);

  // Faults still work after the restart.
  await toxiproxy.setEnabled('echo', false);
  await expect(roundTrip(proxy.listen)).rejects.toThrow();
  await toxiproxy.reset();
  await expect(roundTrip(proxy.listen)).resolves.toBe('ping');
});
