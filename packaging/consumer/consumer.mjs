// What another repo does with the published packages, in plain Node (no TypeScript loader): validate and plan a
// layout, resolve a model in a discovery snapshot, start a simulated SGLang engine and call the chosen replica.
// Prints one JSON line the consumer test reads.
import { readFileSync } from 'node:fs';
import { planPlacement } from '@uis/planner';
import { ReplicaSelector, resolveModel } from '@uis/routing';
import { SGLangClient } from '@uis/sglang-engine';
import { startSimServer } from '@uis/sglang-sim';
import { DiscoverySnapshotSchema, loadConfig, UisError } from '@uis/spec';

const [configPath] = process.argv.slice(2);
const planned = planPlacement(loadConfig(readFileSync(configPath, 'utf8'), configPath));
if (!planned.ok) throw new Error(`plan failed: ${JSON.stringify(planned.errors)}`);

const sim = await startSimServer({ host: '127.0.0.1', port: 0, servedModelName: 'policy' });
try {
  await sim.ready;
  const snapshot = DiscoverySnapshotSchema.parse({
    role: 'rollout',
    topology_revision: 1,
    phase: null,
    models: {
      policy: {
        state: 'ready',
        router_url: null,
        engines: [{ engine_id: 'policy/0', base_url: sim.url, state: 'ready', direct_eligible: true }],
      },
    },
  });
  const resolved = resolveModel(snapshot, { model: 'policy' });
  if (resolved instanceof UisError) throw resolved;
  const selection = new ReplicaSelector().select(resolved);
  if (selection instanceof UisError) throw selection;
  const client = new SGLangClient(selection.url);
  const answer = await client.generate({ text: 'hello', sampling_params: { max_new_tokens: 4 } });
  await client.close();
  console.log(
    JSON.stringify({
      placements: planned.plan.placements.length,
      mode: planned.plan.mode,
      engineId: selection.engineId,
      url: selection.url,
      simUrl: sim.url,
      completionTokens: answer.meta_info?.completion_tokens,
    }),
  );
} finally {
  await sim.close();
}
