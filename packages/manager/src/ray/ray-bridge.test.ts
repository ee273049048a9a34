import { fileURLToPath } from 'node:url';
import { isUisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActorExitEvent } from './bridge-protocol.ts';
import { RayBridge } from './ray-bridge.ts';
import { pidsMentioning } from './ray-head.ts';

const FAKE = fileURLToPath(new URL('./fake-bridge.fixture.mjs', import.meta.url));
const bridges: RayBridge[] = [];
afterEach(async () => {
  await Promise.all(bridges.splice(0).map((b) => b.close(5_000)));
});

async function fake(address = 'fake:1', requestTimeoutMs?: number): Promise<RayBridge> {
  const b = await RayBridge.start({
    address,
    command: [process.execPath, FAKE],
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
  });
  bridges.push(b);
  return b;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return isUisError(e) ? `${e.code}/${e.status}` : String(e);
  }
}

describe('RayBridge protocol (scripted bridge, no Ray needed)', () => {
  it('waits for ready, skips stray stdout, and matches answers to requests by id out of order', async () => {
    const b = await fake();
    expect([b.rayVersion, b.nodes]).toEqual(['0.0.0-fake', 2]);
    const slow = b.freePorts('p', 0, 1, '127.0.0.1');
    const fast = b.state();
    expect(await fast).toEqual({ placement_groups: [{ name: 'p', state: 'CREATED' }], actors: [] });
    expect(await slow).toEqual([4242]);
  });

  it('turns bridge errors into UisErrors with a stable code and status, and refuses malformed answers', async () => {
    const b = await fake();
    expect(await code(b.removePg('p'))).toBe('pg_not_owned/409');
    expect(await code(b.probe('p'))).toBe('ray_bridge_protocol/502');
  });

  it('times out a request that gets no answer', async () => {
    const b = await fake('fake:1', 300);
    expect(await code(b.pgExists('p'))).toBe('ray_timeout/504');
  });

  it('pushes actor exits to listeners and keeps them for late subscribers', async () => {
    const b = await fake();
    const seen: ActorExitEvent[] = [];
    b.onActorExit((e) => seen.push(e));
    expect(await b.tail('m/0#1', 2)).toEqual(['a', 'b']);
    expect(seen.map((e) => [e.handle, e.code, e.tail])).toEqual([['m/0#1', 3, ['boom']]]);
    expect(b.exitOf('m/0#1')?.reason).toBe('process exited');
  });

  it('rejects pending requests when the bridge dies, and every request after', async () => {
    const b = await fake();
    const pending = b
      .state()
      .then(() =>
        b.startProcess({ pg: 'p', bundle_index: 0, num_gpus: 0.2, argv: ['x'], env: {}, label: 'l' }),
      );
    expect(await code(pending)).toBe('ray_bridge_exited/502');
    expect(await code(b.state())).toBe('ray_bridge_closed/503');
  });

  it('reports a failed connection with the bridge code', async () => {
    expect(await code(fake('fatal'))).toBe('ray_connect_failed/502');
  });

  it('a bridge that reports a failed connection and lingers is gone when start() fails', async () => {
    expect(await code(fake('fatal-linger'))).toBe('ray_connect_failed/502');
    expect(pidsMentioning(`${FAKE} --address fatal-linger`)).toEqual([]);
  });
});
