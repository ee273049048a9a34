import { execFileSync } from 'node:child_process';
import { createConnection } from 'node:net';
import { planPlacement } from '@uis/planner';
import { type ChatCompletionRequest, SGLangClient } from '@uis/sglang-engine';
import { type SimOptionsInput, type SimServer, startSimServer } from '@uis/sglang-sim';
import {
  configuredRoles,
  deferPhases,
  type InferenceRoleSpec,
  isUisError,
  type PlacementPlan,
  type Role,
  roleSpec,
  UisConfigSchema,
} from '@uis/spec';
import type { GenrmOutput } from './batch-store.ts';
import { InferenceManager, type InferenceManagerInit, type RouterRegistrar } from './inference-manager.ts';
import { SimLauncher } from './launchers.ts';
import type { ScoreParser } from './score-parsers.ts';

// Test and bench support, exported as `@uis/manager/testing` so the gateway's tests share these layouts.

/** A config object -> the planner's real plan + every role's spec. Throws with every violation when the layout is
 * invalid. */
export function planConfig(config: unknown): {
  plan: PlacementPlan;
  roles: Partial<Record<Role, InferenceRoleSpec>>;
} {
  const parsed = UisConfigSchema.parse(config);
  const result = planPlacement(parsed);
  if (!result.ok)
    throw new Error(`invalid layout: ${result.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
  const roles: Partial<Record<Role, InferenceRoleSpec>> = {};
  for (const { role, spec } of configuredRoles(parsed)) roles[role] = roleSpec(role, spec);
  return { plan: result.plan, roles };
}

/** What a call or promise ends with: 'ok', or the code it fails with (a non-UisError as its text). */
export async function outcomeCode(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
    return 'ok';
  } catch (e) {
    return isUisError(e) ? e.code : String(e);
  }
}

const group = (num_gpus: number, gpus_per_engine: number) => ({ num_gpus, gpus_per_engine });

/** A model of a test layout: its fields as the config writes them, `model_path` `/models/<name>` unless given. */
export interface LayoutModel {
  name: string;
  model_path?: string;
  weight_source: string;
  engine_groups: Array<Record<string, unknown>>;
  [field: string]: unknown;
}

/** A role of a test layout deployed in `mode`, serving `models`. A colocated role is offloaded while it sleeps and
 * routes to its first model by default (`routing` adds rules); a decoupled role has neither unless `routing` is
 * given. Any other option is a field of the role as the config writes it (e.g. `external_engine_urls`). */
export function layoutRole(
  mode: 'colocated_split' | 'colocated_defer' | 'decoupled',
  models: LayoutModel | LayoutModel[],
  { routing, ...fields }: { routing?: Record<string, unknown>; [field: string]: unknown } = {},
) {
  const list = Array.isArray(models) ? models : [models];
  const colocated = mode !== 'decoupled';
  return {
    deployment: colocated ? { mode, offload: true } : { mode },
    ...(colocated || routing ? { routing: { default_model: list[0]?.name, ...routing } } : {}),
    ...fields,
    models: list.map((m) => ({ ...m, model_path: m.model_path ?? `/models/${m.name}` })),
  };
}

/** The models of the three-role layouts: the policy loads from disk, the judge and the teacher are static. */
const POLICY = { name: 'policy', weight_source: 'disk' };
const JUDGE = { name: 'judge', weight_source: 'static' };
const TEACHER = { name: 'teacher', weight_source: 'static' };

/** Split layout: rollout, GenRM and teacher on disjoint slices of an 8-GPU actor pool, all resident. */
export function splitConfig(opts: { faultTolerance?: boolean; rolloutSource?: string } = {}) {
  return {
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: layoutRole('colocated_split', {
        ...POLICY,
        weight_source: opts.rolloutSource ?? POLICY.weight_source,
        fault_tolerance_enabled: opts.faultTolerance ?? false,
        engine_groups: [group(4, 2)],
      }),
      genrm: layoutRole('colocated_split', { ...JUDGE, engine_groups: [group(2, 2)] }),
      teacher: layoutRole('colocated_split', { ...TEACHER, engine_groups: [group(2, 2)] }),
    },
  };
}

/** Defer layout: all three roles share the 8 actor GPUs, one phase at a time. */
export function deferConfig() {
  return {
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: layoutRole('colocated_split', { ...POLICY, engine_groups: [group(8, 4)] }),
      genrm: layoutRole('colocated_defer', { ...JUDGE, engine_groups: [group(8, 4)] }),
      teacher: layoutRole('colocated_defer', { ...TEACHER, engine_groups: [group(8, 8)] }),
    },
    schedule: {
      activation_groups: [
        {
          name: 'actor',
          phases: deferPhases(['genrm', 'teacher']),
        },
      ],
    },
  };
}

/** One teacher engine of TP 4 over two 2-GPU nodes: a multi-node replica (one head, two node processes). */
export function twoNodeTeacherConfig() {
  return {
    cluster: {
      nodes: [
        { name: 'node-0', gpus: 2 },
        { name: 'node-1', gpus: 2 },
      ],
    },
    training: { actor_gpus: 0 },
    roles: {
      teacher: layoutRole('decoupled', { ...TEACHER, engine_groups: [group(4, 4)] }),
    },
  };
}

/** One rollout model behind the real SGLang router (round robin, 60 s request timeout), colocated with offload on
 * the actor's GPUs of one node: as many GPUs as `engines` (one engine group) takes. */
export function routedRolloutConfig(engines: { num_gpus: number; gpus_per_engine: number; tp?: number }) {
  return {
    cluster: { nodes: [{ name: 'node-0', gpus: engines.num_gpus }] },
    training: { actor_gpus: engines.num_gpus, offload_train: true },
    roles: {
      rollout: layoutRole('colocated_split', {
        ...POLICY,
        route_mode: 'sglang_router',
        router: { policy: 'round_robin', args: { request_timeout_secs: 60 } },
        engine_groups: [engines],
      }),
    },
  };
}

/** Why the real SGLang router cannot run here (python3 cannot import sglang_router), or undefined when it can;
 * a reason is printed with `label`, so a skipped suite says why. */
export function sglangRouterSkipReason(label: string): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import sglang_router'], { stdio: 'pipe' });
    return undefined;
  } catch {
    const reason = 'python3 cannot import sglang_router (install requirements-ci.txt)';
    console.log(`[${label} tests skipped] ${reason}`);
    return reason;
  }
}

/** An in-process sim on 127.0.0.1 serving `model` (loaded from `/models/<model>`, served under that name), ready
 * to generate (a sim answers 503 until its startup timer fired, even a 0 ms one); `options` add sim settings
 * (e.g. a slower decode). */
export async function startModelSim(
  model: string,
  options: Partial<SimOptionsInput> = {},
): Promise<SimServer> {
  const sim = await startSimServer({
    host: '127.0.0.1',
    port: 0,
    modelPath: `/models/${model}`,
    servedModelName: model,
    ...options,
  });
  await sim.ready;
  return sim;
}

/** The GenRM outputs a batch of `samples` must end with, found outside the manager and the batch runner: each sample
 * judged by the engine at `engineUrl` (served as `judge`) with the runner's GenRM sampling (temperature 0.2, top_p 1,
 * top_k -1) and the sample's own max_new_tokens and ignore_eos, its text scored by `scoreParser`. */
export async function expectedGenrmOutputs(
  engineUrl: string,
  samples: ReadonlyArray<{
    input: {
      messages: ChatCompletionRequest['messages'];
      sampling_params: { max_new_tokens: number; ignore_eos?: boolean };
    };
  }>,
  scoreParser: ScoreParser,
): Promise<GenrmOutput[]> {
  const client = new SGLangClient(engineUrl);
  try {
    const out: GenrmOutput[] = [];
    for (const s of samples) {
      const { max_new_tokens, ignore_eos } = s.input.sampling_params;
      const r = await client.chatCompletions({
        model: 'judge',
        messages: s.input.messages,
        max_tokens: max_new_tokens,
        temperature: 0.2,
        top_p: 1,
        top_k: -1,
        ...(ignore_eos === undefined ? {} : { ignore_eos }),
      });
      const text = (r.choices[0]?.message.content ?? '').trim();
      out.push({ response: text, score: scoreParser(text) as number });
    }
    return out;
  } finally {
    await client.close();
  }
}

/** Manager options of the real-Ray tests: quick health checks and restarts, a generous start deadline (a Ray actor
 * and its engine can take a minute to come up on a loaded 2-core machine). */
export const RAY_TEST_MANAGER_OPTIONS = {
  healthIntervalMs: 500,
  healthTimeoutMs: 5_000,
  failuresToDead: 2,
  restartBackoffMs: 200,
  startDeadlineMs: 120_000,
};

/** A manager of one decoupled rollout `model` on a node of `gpus` GPUs, launching real sglang-sim processes from
 * the real command line (`offload`: the memory saver is on, so the model may sleep). Not started; the caller shuts
 * it down. */
export function simRolloutManager(
  model: LayoutModel,
  init: Partial<Omit<InferenceManagerInit, 'role' | 'placements' | 'pools'>> = {},
  { gpus = 8, offload = false }: { gpus?: number; offload?: boolean } = {},
): InferenceManager {
  const { plan, roles } = planConfig({
    cluster: { nodes: [{ name: 'node-0', gpus }] },
    training: { actor_gpus: 0 },
    roles: {
      rollout: layoutRole('decoupled', model, offload ? { deployment: { mode: 'decoupled', offload } } : {}),
    },
  });
  return new InferenceManager({
    role: roles.rollout as InferenceRoleSpec,
    placements: plan.placements,
    pools: plan.pools,
    launcher: new SimLauncher(),
    ...init,
    options: { healthIntervalMs: 100, startDeadlineMs: 60_000, ...init.options },
  });
}

/** Records what a manager registers with and removes from its router, in order, as a router would receive it. */
export class RecordingRouter implements RouterRegistrar {
  readonly log: Array<{ op: 'add' | 'remove'; url: string; worker_type?: string; bootstrap_port?: number }> =
    [];
  async addWorker(req: { url: string; worker_type?: string; bootstrap_port?: number }): Promise<unknown> {
    this.log.push({ op: 'add', ...req });
    return { api: 'workers' };
  }
  async removeWorker(url: string): Promise<void> {
    this.log.push({ op: 'remove', url });
  }
  added(): Array<{ url: string; worker_type?: string; bootstrap_port?: number }> {
    return this.log.filter((w) => w.op === 'add').map(({ op: _op, ...w }) => w);
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function portListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
