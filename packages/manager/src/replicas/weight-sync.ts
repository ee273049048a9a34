import { type Clock, capabilities, groupTp, UisError } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import {
  checkTensorUpdate,
  engineWeightUpdate,
  type ParsedWeightUpdate,
  type WeightUpdateResult,
} from '../weight-update.ts';
import type { EngineRecords } from './engine-records.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime, Slot } from './types.ts';

/** Weight versions: each model's target and its replayable last update, each replica's reported version, and
 * bringing replicas to the target. Owns `model.target`, `model.replay`, `model.dcsRegistered` and
 * `slot.weightVersion`. */
export class WeightSync {
  constructor(
    private readonly replicas: ReplicaTable,
    private readonly records: EngineRecords | null,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly clock: Clock,
    private readonly audit: Audit,
  ) {}

  refuseStatic(m: ModelRuntime, what: string): void {
    if (m.spec.weight_source === 'static')
      throw new UisError({
        code: 'static_model',
        path: `models.${m.spec.name}.weight_source`,
        message: `model ${m.spec.name} has weight_source static: it refuses ${what}`,
      });
  }

  registerDcs(m: ModelRuntime): void {
    this.refuseStatic(m, 'DCS registration');
    m.dcsRegistered = true;
  }

  /** Reads the version a (re)launched engine loaded. */
  async readVersion(s: Slot): Promise<void> {
    s.weightVersion = await this.replicas.engineOf(s).weightVersion();
  }

  /** The model's version when it has none yet: what a first engine loaded (they all loaded model_path). */
  adoptTarget(m: ModelRuntime): void {
    if (m.target !== null) return;
    const versions = this.replicas
      .slotsOf(m.spec.name)
      .map((s) => s.weightVersion)
      .filter((v): v is string => v !== null);
    m.target = versions[0] ?? null;
  }

  /** An attached engine's version becomes the target of a model that has none yet. */
  adoptVersionOf(m: ModelRuntime, s: Slot): void {
    if (m.target === null) m.target = s.weightVersion;
  }

  /** Whether onload must sync weights: a non-static model whose replica is below the target. The version is the
   * one the replica reported before it slept: a sleeping engine's weights do not change. */
  needsSync(s: Slot, m: ModelRuntime): boolean {
    if (!capabilities(m.spec).needs_weight_update || m.target === null) return false;
    return s.weightVersion !== m.target;
  }

  /** Brings a replica to the model's target version when the last update can be replayed. */
  async sync(s: Slot, m: ModelRuntime): Promise<void> {
    if (!capabilities(m.spec).needs_weight_update || m.target === null) return;
    const engine = this.replicas.engineOf(s);
    s.weightVersion = await engine.weightVersion();
    if (s.weightVersion === m.target || !m.replay) return;
    const t0 = this.clock.now();
    s.weightVersion = (await engine.updateWeights(engineWeightUpdate(m.replay, s.engineId))).weightVersion;
    this.records?.weight(s);
    this.audit(
      'replica.weights_synced',
      s.engineId,
      { model: s.model, weight_version: s.weightVersion, target: m.target },
      this.clock.now() - t0,
    );
  }

  /** Updates every resident replica; moves the target (and the replayable update) unless every replica failed. */
  async update(m: ModelRuntime, req: ParsedWeightUpdate): Promise<WeightUpdateResult> {
    // Refused before any replica is touched: a replica whose SGLang release cannot do it would fail mid-update.
    const action = req.source === 'distributed' ? req.action : 'update';
    for (const s of this.replicas.slotsOf(m.spec.name)) s.engine?.checkWeightUpdate(req.source, action);
    // Tensors name every replica of the model: replicas asleep load theirs when they onload.
    if (req.source === 'tensor')
      checkTensorUpdate(
        req,
        this.replicas
          .slotsOf(m.spec.name)
          .map((s) => ({ engineId: s.engineId, tp: groupTp(s.group), dp: s.group.dp })),
        'body',
      );
    const resident = this.replicas
      .slotsOf(m.spec.name)
      .filter(
        (s) =>
          (s.state === 'ready' || s.state === 'onloading' || s.state === 'draining') &&
          s.memory.resumed.has('weights'),
      );
    if (req.source === 'distributed' && req.action === 'init' && resident.length === 0)
      // Nothing would join the trainer's group: it would wait for a world that never forms.
      throw new UisError({
        code: 'no_resident_replica',
        path: 'body.action',
        message: `no replica of ${m.spec.name} has its weights loaded to join weight group ${req.group_name}${
          m.held
            ? ': an operator drained the model; activate it first'
            : '; activate the model (or its phase) first'
        }`,
      });
    const gpusPerEngine = m.spec.engine_groups[0]?.gpus_per_engine ?? 1;
    const { clock } = this;
    const t0 = clock.now();
    // Each replica's own time goes into the audit record only (traces show it), not into the answer.
    const timed = await Promise.all(
      resident.map(async (s, i) => {
        const r = await this.updateOne(s, req, i * gpusPerEngine);
        return { r, ms: clock.now() - t0 };
      }),
    );
    const results = timed.map((t) => t.r);
    const audited = () =>
      this.audit(
        'admin.update_weights',
        m.spec.name,
        { source: req.source, target: m.target, results: timed.map((t) => ({ ...t.r, duration_ms: t.ms })) },
        clock.now() - t0,
      );
    const versioned = 'weight_version' in req ? req.weight_version : null;
    if (resident.length > 0 && results.every((r) => !r.ok)) {
      // Nothing changed anywhere: the target stays, or the model would have no eligible replica at all.
      audited();
      throw new UisError({
        code: 'weight_update_failed',
        path: 'body',
        message: `${req.source} weight update of ${m.spec.name} failed on every replica: ${results.map((r) => `${r.engine_id}: ${r.error}`).join('; ')}`,
        details: { engines: results },
      });
    }
    if (versioned !== null) {
      m.target = versioned;
      m.replay = req.source === 'distributed' ? null : req;
    }
    await this.routers.sync();
    this.publication.publish();
    audited();
    return { model: m.spec.name, weight_version: m.target, engines: results };
  }

  private async updateOne(
    s: Slot,
    req: ParsedWeightUpdate,
    rankOffset: number,
  ): Promise<WeightUpdateResult['engines'][number]> {
    const engine = this.replicas.engineOf(s);
    try {
      if (req.source === 'distributed' && req.action === 'init') {
        await engine.initWeightsUpdateGroup({
          master_address: req.master_address,
          master_port: req.master_port,
          rank_offset: req.rank_offset + rankOffset,
          world_size: req.world_size,
          group_name: req.group_name,
          backend: req.backend,
        });
      } else if (req.source === 'distributed' && req.action === 'destroy') {
        await engine.destroyWeightsUpdateGroup({ group_name: req.group_name });
      } else {
        s.weightVersion = (await engine.updateWeights(engineWeightUpdate(req, s.engineId))).weightVersion;
        this.records?.weight(s);
      }
      return { engine_id: s.engineId, ok: true, weight_version: s.weightVersion };
    } catch (e) {
      s.weightVersion = await engine.weightVersion().catch(() => s.weightVersion);
      this.records?.weight(s);
      return { engine_id: s.engineId, ok: false, weight_version: s.weightVersion, error: errorMessage(e) };
    }
  }
}
