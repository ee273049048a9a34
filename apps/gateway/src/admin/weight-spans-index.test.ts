import { StreamVersionSpans } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// Where a request's weights changed, declared to the output token, on the routes and releases a trainer uses. Each
// case stops the engine at a known output token of one request (the simulator's break point), runs a
// pause_in_place switch while it stands there, then lets it go: the declared index must be the simulator's own
// record of which version made each token. No sleeps: every wait is on a condition.
const TOKEN = 'admin-token-spans-index';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const AT = 6;
const LONG = { max_tokens: 40, ignore_eos: true };
/** Non-streamed requests beside the stream: long enough to still run when the stream reaches its token AT. */
const BESIDE = 1000;

interface Span {
  version: string;
  start: number;
  end: number;
}

/** An SSE answer read as it comes: its data events, named events, and the content chunks so far. */
class SseReader {
  readonly events: Array<Record<string, unknown>> = [];
  readonly named = new Map<string, Record<string, unknown>>();
  sawDone = false;
  afterDone = 0;
  readonly done: Promise<void>;

  constructor(res: Promise<Response>) {
    this.done = res.then(async (r) => {
      expect(r.status).toBe(200);
      let buf = '';
      for await (const part of r.body as unknown as AsyncIterable<Uint8Array>) {
        buf += Buffer.from(part).toString();
        for (let at = buf.indexOf('\n\n'); at !== -1; at = buf.indexOf('\n\n')) {
          this.#event(buf.slice(0, at));
          buf = buf.slice(at + 2);
        }
      }
    });
  }

  #event(text: string): void {
    if (this.sawDone) this.afterDone++;
    const name = /^event: (.*)$/m.exec(text)?.[1];
    const data = /^data: (.*)$/m.exec(text)?.[1] ?? '';
    if (data === '[DONE]') this.sawDone = true;
    else if (name !== undefined) this.named.set(name, JSON.parse(data));
    else this.events.push(JSON.parse(data));
  }

  /** Chunks with text (one per output token at --stream-interval 1). */
  get textChunks(): number {
    return this.events.filter((e) => {
      const c = (e.choices as Array<{ text?: string; delta?: { content?: string } }>)[0];
      return (c?.text ?? c?.delta?.content ?? '') !== '';
    }).length;
  }
}

function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

function suite(release: string, spans: boolean, front: 'fast' | 'node') {
  describe(`the token index of a version change, SGLang ${release}, ${front} front`, {
    timeout: 120_000,
  }, () => {
    const gw = gatewayOnSims({
      config: singleRolloutConfig(1),
      sim: { simDecodeUsPerToken: 1000, simSglangVersion: release },
      server: { adminToken: TOKEN, healthProbeMs: 0, front },
    });

    async function engine() {
      const snap = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot;
      const e = snap.models.policy?.engines[0];
      const sim = gw.launcher.serversOf(e?.engine_id as string)[0];
      if (sim === undefined) throw new Error('no simulator');
      return { sim, version: snap.models.policy?.weight_version as string };
    }

    /** Stops the engine at output token AT of `rid`, once `ready()` holds switches to `to`, and lets it go. */
    async function switchAt(rid: string, to: string, ready: () => boolean) {
      const { sim } = await engine();
      const stopped = sim.steps.breakAt(rid, AT);
      return {
        sim,
        run: async () => {
          await stopped;
          await expect.poll(ready, { timeout: 10_000 }).toBe(true);
          const sw = await post(
            `${gw.url}/admin/roles/rollout/models/policy/weights/switch`,
            {
              mode: 'pause_in_place',
              update: { source: 'disk', model_path: `/ckpt/${to}`, weight_version: to },
            },
            AUTH,
          );
          expect(sw.status).toBe(200);
          sim.steps.unbreak();
        },
      };
    }

    /** The simulator's record of a finished request, as spans. */
    function truth(
      sim: { tokenVersions(rid: string): Array<[number, string]> | undefined },
      rid: string,
      n: number,
    ) {
      const runs = sim.tokenVersions(rid) ?? [];
      return runs.map(([start, version], k): Span => ({ version, start, end: runs[k + 1]?.[0] ?? n }));
    }

    it('an OpenAI chat stream declares each chunk version and the spans after [DONE]; answers beside it too', async () => {
      const { version: from } = await engine();
      let reader: SseReader | undefined;
      const { sim, run } = await switchAt('chat-s', 'v2', () => reader?.textChunks === AT);
      // Non-streamed answers running beside it: stopped at whatever token they reached.
      const native = post(`${gw.url}/rollout/generate`, {
        rid: 'gen-ns',
        text: 'a',
        sampling_params: { max_new_tokens: BESIDE, ignore_eos: true },
      });
      const chat = post(`${gw.url}/rollout/v1/chat/completions`, {
        model: 'policy',
        rid: 'chat-ns',
        messages: [{ role: 'user', content: 'b' }],
        max_tokens: BESIDE,
        ignore_eos: true,
      });
      // Both run before the stream starts, so each has output tokens when the engine stops.
      await expect.poll(() => sim.stats().running, { timeout: 10_000 }).toBe(2);
      reader = new SseReader(
        post(`${gw.url}/rollout/v1/chat/completions`, {
          model: 'policy',
          rid: 'chat-s',
          messages: [{ role: 'user', content: 'c' }],
          stream: true,
          ...LONG,
        }),
      );
      await run();
      await reader.done;

      // The stream: split exactly where the engine's version changed, in the event after [DONE] and per chunk.
      expect(truth(sim, 'chat-s', 40)).toEqual([
        { version: from, start: 0, end: AT },
        { version: 'v2', start: AT, end: 40 },
      ]);
      expect(reader.sawDone).toBe(true);
      expect(reader.afterDone).toBe(1);
      expect(reader.named.get('uis_weight_versions')).toEqual({
        weight_version: 'v2',
        weight_versions: truth(sim, 'chat-s', 40),
      });
      const text = reader.events.filter((e) => (e.choices as unknown[]).length > 0);
      const prints = text.map((e) => e.system_fingerprint);
      // The role chunk, then one chunk per token, then the finish chunk.
      expect(prints).toEqual([from, ...Array(AT).fill(from), ...Array(40 - AT).fill('v2'), 'v2']);
      // The usage the gateway asked for is not the client's: every chunk says `usage: null`, as without it.
      for (const e of reader.events) expect(e.usage).toBeNull();

      // Beside it: a release with spans says where each changed; an older one names the versions only.
      const [g, c] = (await Promise.all([native.then((r) => r.json()), chat.then((r) => r.json())])) as [
        { meta_info: Record<string, unknown> },
        { metadata: Record<string, unknown>; system_fingerprint?: string },
      ];
      const gTruth = truth(sim, 'gen-ns', BESIDE);
      const cTruth = truth(sim, 'chat-ns', BESIDE);
      expect(gTruth.length).toBe(2);
      expect(cTruth.length).toBe(2);
      if (spans) {
        expect(g.meta_info.weight_versions).toEqual(gTruth);
        expect(c.metadata.weight_versions).toEqual(cTruth);
      } else {
        expect(g.meta_info.uis_weight_versions).toEqual([from, 'v2']);
        expect(c.metadata.uis_weight_versions).toEqual([from, 'v2']);
      }
      expect(c.system_fingerprint).toBe('v2');
    });

    it('an OpenAI completions stream whose client asked for usage keeps it, and is split at the same token', async () => {
      const { version: from } = await engine();
      let reader: SseReader | undefined;
      const { sim, run } = await switchAt('cmpl-s', 'v3', () => reader?.textChunks === AT);
      reader = new SseReader(
        post(`${gw.url}/rollout/v1/completions`, {
          model: 'policy',
          rid: 'cmpl-s',
          prompt: 'd',
          stream: true,
          stream_options: { include_usage: true, continuous_usage_stats: true },
          ...LONG,
        }),
      );
      await run();
      await reader.done;
      const expected = truth(sim, 'cmpl-s', 40);
      expect(expected).toEqual([
        { version: from, start: 0, end: AT },
        { version: 'v3', start: AT, end: 40 },
      ]);
      expect(reader.named.get('uis_weight_versions')).toEqual({
        weight_version: 'v3',
        weight_versions: expected,
      });
      const counts = reader.events.map(
        (e) => (e.usage as { completion_tokens: number } | null)?.completion_tokens,
      );
      // The client's own usage: on every chunk, then the include_usage chunk.
      expect(counts.slice(0, 3)).toEqual([1, 2, 3]);
      expect(counts[counts.length - 1]).toBe(40);
      expect(reader.events[AT - 1]?.system_fingerprint).toBe(from);
      expect(reader.events[AT]?.system_fingerprint).toBe('v3');

      // A stream on one version: its fingerprints, no event after [DONE].
      const plain = new SseReader(
        post(`${gw.url}/rollout/v1/completions`, {
          model: 'policy',
          prompt: 'e',
          stream: true,
          max_tokens: 3,
        }),
      );
      await plain.done;
      expect(plain.afterDone).toBe(0);
      expect(plain.events.map((e) => e.system_fingerprint)).toEqual(['v3', 'v3', 'v3']);
      expect(plain.events.map((e) => e.usage)).toEqual([null, null, null]);
    });

    it('a native /generate stream: its finished chunk (0.5.19+) or its chunks versions (older) split at the token', async () => {
      const { version: from } = await engine();
      const chunks: Array<{ meta_info: Record<string, unknown> }> = [];
      let reader: SseReader | undefined;
      const { sim, run } = await switchAt('gen-s', 'v4', () => {
        const last = reader?.events.at(-1) as { meta_info?: { completion_tokens?: number } } | undefined;
        return last?.meta_info?.completion_tokens === AT;
      });
      reader = new SseReader(
        post(`${gw.url}/rollout/generate`, {
          rid: 'gen-s',
          text: 'f',
          stream: true,
          sampling_params: { max_new_tokens: 40, ignore_eos: true },
        }),
      );
      await run();
      await reader.done;
      chunks.push(...(reader.events as typeof chunks));
      const expected = truth(sim, 'gen-s', 40);
      expect(expected).toEqual([
        { version: from, start: 0, end: AT },
        { version: 'v4', start: AT, end: 40 },
      ]);
      const derived = new StreamVersionSpans();
      for (const c of chunks) derived.add(c);
      expect(derived.spans).toEqual(expected);
      const finished = chunks.at(-1)?.meta_info;
      if (spans) expect(finished?.weight_versions).toEqual(expected);
      else expect(finished?.weight_versions).toBeUndefined();
      // A native stream is the engine's own: nothing after [DONE].
      expect(reader.afterDone).toBe(0);
    });

    it('a non-streamed answer stopped at a known token: spans to that token (0.5.19+), or its versions only', async () => {
      const { version: from } = await engine();
      // Nothing to wait for once it stands: a non-streamed answer has sent nothing yet.
      const { sim, run } = await switchAt('gen-known', 'v5', () => true);
      const answer = post(`${gw.url}/rollout/generate`, {
        rid: 'gen-known',
        text: 'g',
        sampling_params: { max_new_tokens: 40, ignore_eos: true },
      });
      await run();
      const body = (await (await answer).json()) as { meta_info: Record<string, unknown> };
      expect(truth(sim, 'gen-known', 40)).toEqual([
        { version: from, start: 0, end: AT },
        { version: 'v5', start: AT, end: 40 },
      ]);
      if (spans) expect(body.meta_info.weight_versions).toEqual(truth(sim, 'gen-known', 40));
      else expect(body.meta_info.uis_weight_versions).toEqual([from, 'v5']);
      expect(body.meta_info.weight_version).toBe('v5');
    });
  });
}

// Each release on one of the gateway's two request fronts (the stream relay is shared).
suite('0.5.17', false, 'node');
suite('0.5.23', true, 'fast');
