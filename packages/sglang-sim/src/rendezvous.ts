import net from 'node:net';

/**
 * The multi-node handshake, standing in for torch.distributed's init: the head (node rank 0) listens on
 * --dist-init-addr, every other rank connects and says its rank. The head is complete when all ranks are in and
 * notices when one drops; a worker notices when the head goes away.
 */
export function parseAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const port = Number(addr.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`--dist-init-addr must be host:port, got ${JSON.stringify(addr)}`);
  }
  return { host: addr.slice(0, i), port };
}

export interface HeadRendezvous {
  connected(): number;
  close(): Promise<void>;
}

export function listenHead(
  addr: string,
  nnodes: number,
  events: { onComplete: () => void; onLost: (rank: number) => void },
): Promise<HeadRendezvous> {
  const { host, port } = parseAddr(addr);
  const peers = new Map<number, net.Socket>();
  const server = net.createServer((sock) => {
    let buf = '';
    let rank = -1;
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      if (rank !== -1) return;
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl === -1) return;
      const r = Number(buf.slice(0, nl));
      if (!Number.isInteger(r) || r <= 0 || r >= nnodes || peers.has(r)) {
        sock.end('rejected\n');
        return;
      }
      rank = r;
      peers.set(r, sock);
      sock.write('ok\n');
      if (peers.size === nnodes - 1) events.onComplete();
    });
    sock.on('error', () => {});
    sock.on('close', () => {
      if (rank !== -1 && peers.get(rank) === sock) {
        peers.delete(rank);
        events.onLost(rank);
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      if (nnodes <= 1) events.onComplete();
      resolve({
        connected: () => peers.size + 1,
        close: () =>
          new Promise((r) => {
            for (const s of peers.values()) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}

export interface WorkerRendezvous {
  close(): void;
}

/** Connects to the head, retrying until it listens; `onLost` fires if the head goes away after joining. */
export function joinHead(
  addr: string,
  rank: number,
  events: { onJoined: () => void; onLost: () => void },
  retryMs = 200,
): WorkerRendezvous {
  const { host, port } = parseAddr(addr);
  let closed = false;
  let sock: net.Socket | null = null;
  let timer: NodeJS.Timeout | null = null;
  const attempt = () => {
    if (closed) return;
    let joined = false;
    const s = net.connect(port, host);
    sock = s;
    s.setEncoding('utf8');
    s.on('connect', () => s.write(`${rank}\n`));
    s.on('data', (d: string) => {
      if (!joined && d.startsWith('ok')) {
        joined = true;
        events.onJoined();
      }
    });
    s.on('error', () => {});
    s.on('close', () => {
      if (closed) return;
      if (joined) events.onLost();
      else timer = setTimeout(attempt, retryMs);
    });
  };
  attempt();
  return {
    close: () => {
      closed = true;
      if (timer) clearTimeout(timer);
      sock?.destroy();
    },
  };
}
