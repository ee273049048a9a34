import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePorts, ServerInfoSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { get } from './testing.ts';

const BIN = fileURLToPath(new URL('../bin/sglang-sim.mjs', import.meta.url));
const children: ChildProcess[] = [];

/** Kills the process group of every child still alive, so no simulator outlives the tests. */
afterAll(() => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null && c.pid) {
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});

interface Proc {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

function launch(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [BIN, ...args], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, log: () => out, exited };
}

const status = async (url: string) => {
  try {
    return (await get(url, '/health', AbortSignal.timeout(2000))).status;
  } catch {
    return 0;
  }
};

describe('sglang-sim CLI', () => {
  it('serves with SGLang flags, warns about ones it does not model, reports CUDA_VISIBLE_DEVICES, exits 0 on SIGTERM', async () => {
    const [port] = (await freePorts(1)) as [number];
    const argv = ['--model-path', 'org/m', '--port', String(port), '--tp', '2', '--attention-backend', 'fa3'];
    const p = launch(argv, { CUDA_VISIBLE_DEVICES: '4,5' });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await status(url)) === 200, 30_000);
    // The log pipe may lag behind the HTTP answer.
    await waitFor(() => p.log().includes('The server is fired up and ready to roll!'), 30_000);
    expect(p.log()).toContain('ignoring --attention-backend (an SGLang flag the simulator does not model)');
    const info = ServerInfoSchema.parse((await get(url, '/get_server_info')).json);
    expect(info).toMatchObject({ model_path: 'org/m', tp_size: 2, cuda_visible_devices: '4,5' });
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 60_000);

  it('refuses a flag the simulated SGLang release lacks as its argparse does: exit 2, the flag named', async () => {
    const p = launch(['--model-path', 'org/m', '--port', '0', '--no-such-flag', 'x']);
    expect(await p.exited).toBe(2);
    await waitFor(
      () => p.log().includes('launch_server.py: error: unrecognized arguments: --no-such-flag x'),
      10_000,
    );
    const old = launch([
      '--model-path',
      'org/m',
      '--port',
      '0',
      '--enable-weights-cpu-backup',
      '--sim-sglang-version',
      '0.5.2',
    ]);
    expect(await old.exited).toBe(2);
    expect(old.log()).toContain(
      'launch_server.py: error: unrecognized arguments: --enable-weights-cpu-backup',
    );
  }, 60_000);

  it('runs a two-node engine: the head is healthy only while the other rank is connected', async () => {
    // Held open together: ports taken one after another could come back the same.
    const [headPort, workerPort, distPort] = (await freePorts(3)) as [number, number, number];
    const common = [
      '--model-path',
      'org/big',
      '--tp-size',
      '4',
      '--nnodes',
      '2',
      '--dist-init-addr',
      `127.0.0.1:${distPort}`,
    ];
    const head = launch([...common, '--node-rank', '0', '--port', String(headPort)]);
    const headUrl = `http://127.0.0.1:${headPort}`;
    const workerUrl = `http://127.0.0.1:${workerPort}`;
    await waitFor(async () => (await status(headUrl)) === 503, 30_000);

    const worker = launch([...common, '--node-rank', '1', '--port', String(workerPort)]);
    await waitFor(async () => (await status(headUrl)) === 200, 30_000);
    expect(await status(workerUrl)).toBe(200);
    // Only the head serves the API; the other rank answers a stub /health.
    expect((await get(workerUrl, '/get_model_info')).status).toBe(404);
    expect((await get(headUrl, '/get_model_info')).status).toBe(200);
    expect(
      ServerInfoSchema.parse((await get(headUrl, '/get_server_info')).json).internal_states?.[0],
    ).toMatchObject({
      connected_nodes: 2,
    });

    worker.child.kill('SIGKILL');
    await worker.exited;
    await waitFor(async () => (await status(headUrl)) === 503, 30_000);
    await waitFor(() => head.log().includes('node rank 1 left'), 30_000);
    head.child.kill('SIGTERM');
    expect(await head.exited).toBe(0);
  }, 90_000);

  it('a worker rank exits non-zero when the head goes away', async () => {
    const [headPort, workerPort, distPort] = (await freePorts(3)) as [number, number, number];
    const common = ['--nnodes', '2', '--dist-init-addr', `127.0.0.1:${distPort}`];
    const head = launch([...common, '--node-rank', '0', '--port', String(headPort)]);
    const worker = launch([...common, '--node-rank', '1', '--port', String(workerPort)]);
    await waitFor(async () => (await status(`http://127.0.0.1:${headPort}`)) === 200, 30_000);
    head.child.kill('SIGKILL');
    expect(await worker.exited).toBe(1);
  }, 90_000);

  it('exits with a message on bad flags', async () => {
    const p = launch(['--tp', 'two']);
    expect(await p.exited).toBe(2);
    expect(p.log()).toContain('--tp-size');
  }, 30_000);
});
