import { encode } from '@uis/sglang-sim';
import { type Logger, silentLogger, sseData } from '@uis/spec';

export interface RlLoopDriverOptions {
  /** The gateway's base URL (`http://127.0.0.1:8080`). */
  baseUrl: string;
  adminToken: string;
  /** Activation group the loop drives. */
  group: string;
  /** Rollout model whose weights the simulated trainer updates every step, and its checkpoint path. */
  policyModel: string;
  policyPath: string;
  /** How the trainer hands over its weights: a checkpoint the engines load from disk (default), or tensors it shares
   * with each engine colocated on its GPUs (`tensor`: one serialized entry per TP rank of `policyTp`). */
  policySource?: 'disk' | 'tensor';
  policyTp?: number;
  /** The phase rollout is resident in, and the trainer's phase. Defaults `rollout` / `train`. */
  rolloutPhase?: string;
  trainPhase?: string;
  /** `model` of the chat requests (an alias shows alias routing); absent: the role's default model. */
  chatModel?: string;
  /** `route_key` of the raw generate requests; absent: the default model. */
  generateRouteKey?: string;
  /** Rollout requests per step, and how many run at once. Defaults 8 / 2: the demo shares 2 cores with a browser. */
  requestsPerStep?: number;
  concurrency?: number;
  /** Simulated training time, and the pause between steps. */
  trainMs?: number;
  pauseMs?: number;
  logger?: Logger;
  fetch?: typeof fetch;
}

const PROMPTS = [
  'Solve 17 * 23 and explain each step.',
  'Write a function that reverses a linked list.',
  'What is the derivative of x^3 * sin(x)?',
  'Prove that the square root of 2 is irrational.',
  'Sort the numbers 9, 4, 7, 1 and show the passes of bubble sort.',
  'How many primes are there below 30?',
];

const JUDGE_SYSTEM =
  'You are a strict grader. Read the problem and the answer, reason briefly, then end with "Judgement: 1" if the answer is correct and "Judgement: 0" otherwise.';

interface Rollout {
  prompt: string;
  text: string;
  /** Prompt and response token ids (teacher OPD input); absent for chat samples. */
  promptIds?: number[];
  outputIds?: number[];
}

/**
 * The demo's RL loop, driven over the public HTTP APIs exactly as an RL controller would: rollout requests through
 * the rollout gateway (chat, streaming chat and raw generate with a route key), GenRM scoring inputs and teacher
 * OPD inputs submitted as deferred batches, the phase advance that runs the defer transition (rollout -> GenRM
 * scoring -> teacher OPD -> train), the trainer barrier, a weight update of the policy, and the barrier release
 * that wakes rollout at the new version. Errors are logged and the loop retries: the demo keeps moving.
 */
export class RlLoopDriver {
  private readonly opts: Required<
    Omit<
      RlLoopDriverOptions,
      'logger' | 'fetch' | 'chatModel' | 'generateRouteKey' | 'policySource' | 'policyTp'
    >
  > &
    Pick<RlLoopDriverOptions, 'chatModel' | 'generateRouteKey' | 'policySource' | 'policyTp'>;
  private readonly logger: Logger;
  private readonly fetch: typeof fetch;
  private readonly controller = new AbortController();
  private loop: Promise<void> | null = null;
  step = 0;

  constructor(opts: RlLoopDriverOptions) {
    this.opts = {
      rolloutPhase: 'rollout',
      trainPhase: 'train',
      requestsPerStep: 8,
      concurrency: 2,
      trainMs: 1500,
      pauseMs: 1000,
      ...opts,
    };
    this.logger = opts.logger ?? silentLogger;
    this.fetch = opts.fetch ?? fetch;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops after aborting whatever call is in flight. */
  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  private async run(): Promise<void> {
    while (!this.signal.aborted) {
      try {
        await this.oneStep();
      } catch (e) {
        if (this.signal.aborted) return;
        this.logger.warn(
          { step: this.step, err: e instanceof Error ? e.message : String(e) },
          'driver step failed',
        );
        await this.sleep(2000);
      }
    }
  }

  private async oneStep(): Promise<void> {
    const step = ++this.step;
    await this.admin('/admin/barriers/wait', {
      phase: this.opts.rolloutPhase,
      group: this.opts.group,
      timeout_s: 600,
    });
    const rollouts = await this.rollouts(step);
    const genrm = rollouts.map((r, i) => ({
      sample_id: `step${step}-genrm-${i}`,
      input: {
        messages: [
          { role: 'system', content: JUDGE_SYSTEM },
          { role: 'user', content: `Problem: ${r.prompt}\nAnswer: ${r.text}` },
        ],
      },
    }));
    const teacher = rollouts
      .filter((r) => r.promptIds !== undefined && r.outputIds !== undefined && r.outputIds.length > 0)
      .map((r, i) => {
        const promptIds = r.promptIds as number[];
        const outputIds = r.outputIds as number[];
        return {
          sample_id: `step${step}-opd-${i}`,
          input: {
            input_ids: [...promptIds, ...outputIds],
            logprob_start_len: promptIds.length,
            response_length: outputIds.length,
          },
        };
      });
    await this.admin('/admin/batches', { kind: 'genrm_score', samples: genrm });
    if (teacher.length > 0)
      await this.admin('/admin/batches', { kind: 'teacher_logprobs', samples: teacher });
    // The trainer blocks at its barrier while rollout -> genrm_score -> teacher_opd -> train runs (the scorer
    // phases score their batches and advance by themselves); it opens once the outputs are written back.
    const barrier = this.admin('/admin/barriers/wait', {
      phase: this.opts.trainPhase,
      group: this.opts.group,
      timeout_s: 600,
    });
    barrier.catch(() => undefined);
    await this.admin('/admin/phases/advance', { group: this.opts.group });
    await barrier;
    await this.sleep(this.opts.trainMs);
    const version = `step-${step}`;
    await this.admin(
      `/admin/roles/rollout/models/${encodeURIComponent(this.opts.policyModel)}/weights`,
      this.opts.policySource === 'tensor'
        ? { source: 'tensor', weight_version: version, per_engine: await this.tensors(version) }
        : { source: 'disk', model_path: this.opts.policyPath, weight_version: version },
    );
    await this.admin('/admin/barriers/release', { phase: this.opts.trainPhase, group: this.opts.group });
    this.logger.info({ step, weight_version: version, samples: rollouts.length }, 'RL step done');
    await this.sleep(this.opts.pauseMs);
  }

  /** What a colocated trainer shares with each policy engine (asleep now: it loads them as it onloads): per TP
   * rank a handle to its weight buffers (base64, as SGLang decodes it), which the simulator only counts. */
  private async tensors(version: string): Promise<Record<string, string[]>> {
    const model = this.opts.policyModel;
    const r = await this.fetch(
      `${this.opts.baseUrl}/rollout/engines?model_name=${encodeURIComponent(model)}`,
      {
        headers: { authorization: `Bearer ${this.opts.adminToken}` },
        signal: this.signal,
      },
    );
    if (!r.ok) throw new Error(`/rollout/engines: ${r.status} ${(await r.text()).slice(0, 300)}`);
    const doc = (await r.json()) as { models?: Record<string, { engines?: Array<{ engine_id: string }> }> };
    const ranks = this.opts.policyTp ?? 1;
    return Object.fromEntries(
      (doc.models?.[model]?.engines ?? []).map((e) => [
        e.engine_id,
        Array.from({ length: ranks }, (_, rank) =>
          Buffer.from(`ipc:${e.engine_id}:${rank}:${version}`).toString('base64'),
        ),
      ]),
    );
  }

  private async rollouts(step: number): Promise<Rollout[]> {
    const out: Rollout[] = [];
    let next = 0;
    const worker = async () => {
      while (!this.signal.aborted) {
        const i = next++;
        if (i >= this.opts.requestsPerStep) return;
        const prompt = PROMPTS[(step + i) % PROMPTS.length] as string;
        const kind = i % 3;
        if (kind === 0) out.push(await this.generate(prompt));
        else out.push(await this.chat(prompt, kind === 2));
      }
    };
    await Promise.all(Array.from({ length: this.opts.concurrency }, worker));
    return out;
  }

  /** Raw SGLang generate (routed by route_key when given): its token ids feed teacher OPD. */
  private async generate(prompt: string): Promise<Rollout> {
    const promptIds = encode(prompt);
    const r = await this.post('/rollout/generate', {
      input_ids: promptIds,
      ...(this.opts.generateRouteKey === undefined ? {} : { route_key: this.opts.generateRouteKey }),
      sampling_params: { max_new_tokens: 24, temperature: 0.8 },
    });
    const body = (await r.json()) as { text?: string; output_ids?: number[] };
    return { prompt, text: body.text ?? '', promptIds, outputIds: body.output_ids ?? [] };
  }

  /** OpenAI chat (through an alias when given), plain or streaming. */
  private async chat(prompt: string, stream: boolean): Promise<Rollout> {
    const r = await this.post('/rollout/v1/chat/completions', {
      ...(this.opts.chatModel === undefined ? {} : { model: this.opts.chatModel }),
      messages: [{ role: 'user', content: prompt }],
      max_tokens: 24,
      stream,
    });
    if (!stream) {
      const body = (await r.json()) as { choices?: Array<{ message?: { content?: string } }> };
      return { prompt, text: body.choices?.[0]?.message?.content ?? '' };
    }
    let text = '';
    for await (const data of sseData(r.body ?? new ReadableStream<Uint8Array>())) {
      if (data === '[DONE]') continue;
      const chunk = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }> };
      text += chunk.choices?.[0]?.delta?.content ?? '';
    }
    return { prompt, text };
  }

  /** Every call carries the admin token: with a serving token configured the serving routes need a token too (the
   * admin token is accepted there), and a token-less driver would spend this host's failed-auth budget, locking
   * the console out of a gateway on the same machine. */
  private async post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const r = await this.fetch(`${this.opts.baseUrl}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${this.opts.adminToken}`,
        ...headers,
      },
      body: JSON.stringify(body),
      signal: this.signal,
    });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${(await r.text()).slice(0, 300)}`);
    return r;
  }

  private admin(path: string, body: unknown): Promise<Response> {
    return this.post(path, body, { 'x-uis-actor': 'driver' }).then(async (r) => {
      await r.arrayBuffer();
      return r;
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.signal.addEventListener('abort', done, { once: true });
    });
  }
}
