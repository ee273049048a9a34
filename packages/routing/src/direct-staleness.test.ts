import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GenerateResponseSchema } from '@uis/sglang-engine';
import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import type { DiscoverySnapshot } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectClient, type FetchLike } from './direct-client.ts';

/** Discovery on 127.0.0.1: answers `GET /rollout/engines` with the snapshot published last. */
class Discovery {
  snapshot: DiscoverySnapshot | undefined;
  readonly server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.snapshot));
  });

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/rollout/engines`;
  }

  /** Model `policy` (max_staleness 1) at `model`, its replicas at `versions`, as revision `revision`. */
  publish(revision: number, model: string, versions: string[], urls: string[]): void {
    this.snapshot = {
      schema_version: 2,
      role: 'rollout',
      topology_revision: revision,
      registry_epoch: 'e1',
      phase: null,
      models: {
        policy: {
          state: 'ready',
          router_url: null,
          weight_version: model,
          max_staleness: 1,
          engines: versions.map((v, i) => ({
            engine_id: `policy/${i}`,
            base_url: urls[i] as string,
            state: 'ready',
            direct_eligible: true,
            weight_version: v,
          })),
        },
      },
      routing: {
        default_model: 'policy',
        route_keys: {},
        aliases: {},
        policy: 'round_robin',
        model_policies: {},
      },
    };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const long = (rid: string) => ({
  rid,
  input_ids: [3, 4, 5],
  sampling_params: { max_new_tokens: 10_000, ignore_eos: true },
});

describe('DirectClient holds its requests in flight to max_staleness', { timeout: 60_000 }, () => {
  let sims: SimServer[];
  let urls: string[];
  const discovery = new Discovery();
  let discoveryUrl: string;
  beforeAll(async () => {
    // 20 ms per token: the requests still run when the topologies change.
    sims = await Promise.all(
      [0, 1].map(() => startSimServer({ host: '127.0.0.1', port: 0, simDecodeUsPerToken: 20_000 })),
    );
    await Promise.all(sims.map((s) => s.ready));
    urls = sims.map((s) => s.url);
    discoveryUrl = await discovery.listen();
  });
  afterAll(async () => {
    await discovery.close();
    await Promise.all(sims.map((s) => s.close()));
  });

  it('a request more than the bound behind the newest version is aborted at its engine with its partial output; one within it runs on', async () => {
    const aborts: string[] = [];
    const fetchFn: FetchLike = (input, init) => {
      if (input.endsWith('/abort_request')) aborts.push(`${input} ${String(init?.body)}`);
      return globalThis.fetch(input, init);
    };
    // The abort's re-sends wait on this clock: only the stale aborts themselves reach the engines.
    const c = new DirectClient({ discoveryUrl, fetch: fetchFn, clock: new ManualClock() });
    const [a, b] = sims as [SimServer, SimServer];
    try {
      discovery.publish(1, '1', ['1', '1'], urls);
      await c.refresh();
      // Round robin: the first request goes to policy/0, on version 1.
      const chunks: string[] = [];
      const old = (async () => {
        for await (const d of c.generateStream(long('old-on-1'))) chunks.push(d);
      })();
      await waitFor(() => chunks.length >= 3);
      expect(a.stats().running).toBe(1);
      // Version 2 on policy/1 (policy/0, left on 1, is below the model: not a candidate): one version behind is
      // within the bound.
      discovery.publish(2, '2', ['1', '2'], urls);
      await c.refresh();
      expect(aborts).toEqual([]);
      const fresh = c.generate(long('new-on-2'));
      fresh.catch(() => undefined);
      await waitFor(() => b.stats().running === 1);
      // Version 3: the request that started on 1 is two behind, the one that started on 2 one behind.
      discovery.publish(3, '3', ['1', '3'], urls);
      await c.refresh();
      expect(aborts).toEqual([`${urls[0]}/abort_request {"rid":"old-on-1"}`]);
      await old;
      const last = GenerateResponseSchema.parse(JSON.parse(chunks.at(-1) as string));
      expect(last.meta_info.finish_reason?.type).toBe('abort');
      expect(last.output_ids?.length).toBeGreaterThanOrEqual(3);
      expect(last.meta_info.weight_version).toBe(a.state().weightVersion);
      // The newer request was not touched; a topology seen again aborts nothing twice.
      expect(b.stats().running).toBe(1);
      expect(b.stats().aborted).toBe(0);
      discovery.publish(4, '3', ['1', '3'], urls);
      await c.refresh();
      expect(aborts).toHaveLength(1);
      expect(await c.abort('new-on-2')).toBe(true);
      expect(GenerateResponseSchema.parse(await fresh).meta_info.finish_reason?.type).toBe('abort');
    } finally {
      await c.close();
    }
  });
});
