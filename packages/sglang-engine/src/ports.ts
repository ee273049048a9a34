import { createServer } from 'node:net';

/** A free TCP port on `host`, found by listening on port 0 and closing again. Another process can still take it
 * before the engine binds; launchers retry a start that fails on a port clash. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/** `n` distinct free ports (held open together so they cannot collide with each other). */
export async function freePorts(n: number, host = '127.0.0.1'): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<import('node:net').Server>((resolve, reject) => {
          const srv = createServer();
          srv.unref();
          srv.on('error', reject);
          srv.listen(0, host, () => resolve(srv));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    return typeof a === 'object' && a ? a.port : 0;
  });
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}
