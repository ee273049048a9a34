import { setImmediate as turn } from 'node:timers/promises';
import type { SGLangEngine, WeightUpdate } from '@uis/sglang-engine';
import { type Clock, groupTp, UisError } from '@uis/spec';
import type { InFlightTracker } from '../in-flight.ts';
import type { Registry } from '../registry.ts';
import { errorMessage } from '../runtime.ts';
import type { ParsedWeightSwitch, WeightSwitchOutcome, WeightSwitchRecord } from '../weight-switch.ts';
import { checkTensorUpdate, engineWeightUpdate, type ReplayableWeightUpdate } from '../weight-update.ts';
import type { EngineRecords } from './engine-records.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime, Slot } from './types.ts';

/** Switches kept per model for the console's timeline. */
const HISTORY = 200;

type EngineRow = WeightSwitchRecord['engines'][number];
type Phases = WeightSwitchRecord['phases_ms'];

/** One replica's part in a switch. */
interface Member {
  s: Slot;
  engine: SGLangEngine;
  ok: boolean;
  updateMs: number | null;
  /** Paused by this switch (continued exactly once). */
  paused: boolean;
  /** Paused in place: its running requests go on with the weights it continues with. */
  inPlace?: boolean;
  /** The version the engine reported after its update (read back by the update itself). */
  reported?: string | null;
  error?: string;
  /** When (switch clock) this member was stopped, its update answered, its version read back, it continued. */
  at: { stopped?: number; loaded?: number; readBack?: number; continued?: number };
}

/** An engine's continues after in-place pauses: how many so far, and the version it continued with at each of
 * the last 16 (`to[to.length - 1]` is the `count`-th). */
export interface InPlaceResumes {
  count: number;
  to: Array<string | null>;
}

const NO_RESUMES: InPlaceResumes = { count: 0, to: [] };

/** Switches whose update times predict a member's next one (see slowestFirst). */
const RECENT = 3;

/** Stops sent per event-loop turn (see stopAndUpdate): few enough that the first answers are handled early, many
 * enough that a busy process (the gateway's traffic shares the loop) takes few turns for a 64-wide fan-out. */
const STOPS_PER_TURN = 8;

/** Deadline of one pause / continue call. */
const CONTROL = { timeoutMs: 60_000 };

/**
 * The fleet weight switch: one operation per model that moves every resident replica from version N to N+1 with a
 * mode (drain, pause_in_place, abort). With `mixed_versions: forbid` each replica is stopped before its update and
 * none continues before the last update is read back, so no replica generates at N+1 while another generates at N;
 * the new topology is published before the continues (the model is on N+1 from then on); each replica's
 * version is read back; a replica whose update fails is quarantined (never eligible until an operator restarts
 * it); `on_failure` rolls the others back or lets them finish on N+1. The slots' versions, the model's target and
 * the published topology move once, at the end. Owns `slot.quarantined`, the running switch of each model and
 * the models' switch history.
 */
export class WeightSwitch {
  readonly #running = new Map<string, Promise<unknown>>();
  readonly #history = new Map<string, WeightSwitchRecord[]>();
  /** In-place pauses per engine, each with the version the engine served before it (the last few): a request in
   * flight across one ran while its weights changed. */
  readonly #inPlace = new Map<string, { count: number; from: Array<string | null> }>();
  /** Continues after in-place pauses per engine, each with the version the engine continued with (the last few):
   * an answer's tokens relayed after the n-th were made by `to[n]` (see resumedInPlace). */
  readonly #resumed = new Map<string, InPlaceResumes>();
  /** Models whose gateway admission is closed by a drain-mode switch. */
  readonly #closed = new Set<string>();
  /** Per model, each member's updates in its last RECENT switches, in ms, oldest first: the next switch stops and
   * updates the slowest first. Replaced by each switch's members, so replicas that left are forgotten. */
  readonly #updateMs = new Map<string, Map<string, number[]>>();
  #nextId = 0;

  constructor(
    private readonly replicas: ReplicaTable,
    private readonly records: EngineRecords | null,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly registry: Registry,
    private readonly inFlight: InFlightTracker,
    private readonly drainDeadlineMs: number,
    private readonly clock: Clock,
    private readonly audit: Audit,
  ) {}

  /** Whether the gateway may admit new work to a replica of `model` (false while a drain-mode switch waits). */
  admits(model: string): boolean {
    return !this.#closed.has(model);
  }

  /** How many times a switch paused the engine in place (its running requests then finish on new weights). */
  inPlaceSwitches(engineId: string): number {
    return this.#inPlace.get(engineId)?.count ?? 0;
  }

  /** The versions an engine served before each of its in-place switches after the `n`-th, oldest first (the last
   * 16 kept): what a request picked when the engine had had `n` such switches ran on before its last token. */
  servedBeforeInPlace(engineId: string, n: number): Array<string | null> {
    const e = this.#inPlace.get(engineId);
    if (e === undefined || n >= e.count) return [];
    return e.from.slice(Math.max(0, e.from.length - (e.count - n)));
  }

  /** The in-place continues of an engine so far (the live record: a relay reads its count per event). */
  resumedInPlace(engineId: string): InPlaceResumes {
    return this.#resumed.get(engineId) ?? NO_RESUMES;
  }

  /** The model's switches, oldest first (the last HISTORY). */
  history(model: string): WeightSwitchRecord[] {
    return [...(this.#history.get(model) ?? [])];
  }

  /** Whether a switch of `model` runs now. */
  running(model: string): boolean {
    return this.#running.has(model);
  }

  /** Runs `fn` (the switch, inside the manager's operation queue) unless one runs for the model: then a keyed
   * call (`queued`: it carries an idempotency key) waits for it, any other is refused 409. */
  async exclusive<T>(model: string, queued: boolean, fn: () => Promise<T>): Promise<T> {
    for (;;) {
      const running = this.#running.get(model);
      if (running === undefined) break;
      if (!queued)
        throw new UisError({
          code: 'weight_switch_in_progress',
          path: 'model',
          message: `a weight switch of ${model} is running; retry when it ends, or send an Idempotency-Key to queue this one behind it`,
        });
      await running.catch(() => undefined);
    }
    const p = fn();
    this.#running.set(model, p);
    try {
      return await p;
    } finally {
      this.#running.delete(model);
    }
  }

  async switch(m: ModelRuntime, req: ParsedWeightSwitch): Promise<WeightSwitchRecord> {
    const name = m.spec.name;
    const slots = this.replicas.slotsOf(name);
    // Refused before any replica is touched: a replica whose release cannot pause or update this way would fail
    // mid-switch.
    for (const s of slots) {
      s.engine?.checkDrain(req.mode === 'abort' ? 'abort' : 'in_place');
      s.engine?.checkWeightUpdate(req.update.source, 'update');
    }
    const members: Member[] = slots
      .filter((s) => this.replicas.eligible(s) && s.engine !== null)
      .map((s) => ({
        s,
        engine: s.engine as SGLangEngine,
        ok: false,
        updateMs: null,
        paused: false,
        at: {},
      }));
    if (req.update.source === 'tensor')
      checkTensorUpdate(
        req.update,
        members.map((x) => ({ engineId: x.s.engineId, tp: groupTp(x.s.group), dp: x.s.group.dp })),
      );
    if (members.length === 0)
      throw new UisError({
        code: 'no_resident_replica',
        path: 'model',
        message: `no replica of ${name} is ready at its weight version ${m.target ?? '(none)'}; activate the model first`,
      });
    const from = m.target;
    const to = req.update.weight_version;
    const t0 = this.clock.now();
    const startedAt = Date.now();
    const forbid = req.mixed_versions === 'forbid';
    // Drain: the gateway admits nothing new to the model until every member is paused.
    if (req.mode === 'drain') this.#closed.add(name);
    const at = (): number => this.clock.now() - t0;
    const phases: Phases = { stopped: 0, loaded: 0, read_back: 0, committed: 0, continued: 0, published: 0 };
    try {
      // 1. Every member stopped and updated, each at its own pace (see stopAndUpdate).
      await this.stopAndUpdate(name, members, req, at);
      const failed = members.filter((x) => !x.ok);
      const succeeded = members.filter((x) => x.ok);
      let outcome: WeightSwitchOutcome = failed.length === 0 ? 'switched' : 'quarantined';
      let version: string | null = to;
      if (succeeded.length === 0) {
        outcome = 'failed';
        version = from;
      } else if (failed.length > 0 && req.on_failure === 'rollback') {
        outcome = 'rolled_back';
        version = from;
        await Promise.all(succeeded.map((x) => this.rollBack(x, m, from)));
      }
      // 2. A failed member is asked its version (null: it does not answer), all at once.
      await Promise.all(
        members
          .filter((x) => !x.ok)
          .map(async (x) => {
            x.reported = await x.engine.weightVersion().catch(() => null);
          }),
      );
      // 3. Commit once: quarantine, versions, the target, the router and one published topology.
      this.commit(members, outcome, version);
      if (outcome !== 'failed' && outcome !== 'rolled_back') {
        m.target = to;
        // An update the trainer sends (NCCL, tensors) cannot be replayed by a replica that comes back alone.
        m.replay = req.update.source === 'disk' || req.update.source === 'version' ? req.update : null;
      }
      phases.committed = at();
      // The whole model is on the new version once this topology is out: every member is updated and read back
      // (or rolled back, or quarantined), so it is published before the members continue, and a request routed to
      // a member whose continue has not landed yet waits in that engine's queue, to run on the new weights.
      await this.routers.sync();
      this.publication.publish();
      phases.published = at();
      if (forbid) await Promise.all(members.map((x) => this.resume(x, at)));
      this.remember(name, members);
      for (const x of members) {
        phases.stopped = Math.max(phases.stopped, x.at.stopped ?? 0);
        phases.loaded = Math.max(phases.loaded, x.at.loaded ?? 0);
        phases.read_back = Math.max(phases.read_back, x.at.readBack ?? 0);
        phases.continued = Math.max(phases.continued, x.at.continued ?? 0);
      }
      return this.record(m, req, { from, version, outcome, t0, startedAt, members, phases });
    } finally {
      this.#closed.delete(name);
      // A switch that threw half-way still lets every member generate again.
      await Promise.allSettled(members.map((x) => this.resume(x, at)));
    }
  }

  /** Each member stops (drained first in drain mode) and updates at once: a paused member generates nothing, so
   * updating it while another still finishes on N mixes no versions; only continuing must wait (forbid) until
   * every member is updated. With `allow`, each continues as soon as its own update is read back.
   * Slowest first: the switch lasts as long as its latest-finishing update, so the long updates start first. The
   * stops go out STOPS_PER_TURN per event-loop turn, not all in one burst: the answers that arrived meanwhile send
   * their members' updates at once, so the slowest members' updates leave behind a few pauses, not behind the
   * whole fan-out. */
  private async stopAndUpdate(
    name: string,
    members: Member[],
    req: ParsedWeightSwitch,
    at: () => number,
  ): Promise<void> {
    const policy = req.mode === 'abort' ? 'abort' : 'in_place';
    const deadlineMs = req.deadline_ms ?? this.drainDeadlineMs;
    const stopped: Array<Promise<void>> = [];
    const updated: Array<Promise<void>> = [];
    for (const x of this.slowestFirst(name, members)) {
      if (stopped.length > 0 && stopped.length % STOPS_PER_TURN === 0) await turn();
      const stop = (async () => {
        if (req.mode === 'drain') await this.waitIdle(x, deadlineMs);
        await this.pause(x, policy);
        x.at.stopped = at();
      })();
      stopped.push(stop);
      updated.push(
        stop.then(async () => {
          await this.update(x, engineWeightUpdate(req.update, x.s.engineId), at);
          if (req.mixed_versions === 'allow') await this.resume(x, at);
        }),
      );
    }
    void Promise.all(stopped).then(() => this.#closed.delete(name));
    await Promise.all(updated);
  }

  /** The members, the one predicted slowest first: by each one's fastest update in its last RECENT switches (a
   * loaded machine only adds to an engine's time, so the least of a few is the engine's own; one slow switch
   * does not reorder the next); never timed counts as slowest. */
  private slowestFirst(name: string, members: Member[]): Member[] {
    const known = this.#updateMs.get(name);
    const predicted = (x: Member) => {
      const times = known?.get(x.s.engineId);
      return times === undefined ? Number.MAX_SAFE_INTEGER : Math.min(...times);
    };
    return [...members].sort((a, b) => predicted(b) - predicted(a));
  }

  /** Keeps each member's update time for the next switch's order (a failed member's is no prediction). */
  private remember(name: string, members: Member[]): void {
    const known = this.#updateMs.get(name);
    const next = new Map<string, number[]>();
    for (const x of members)
      if (x.ok && x.updateMs !== null)
        next.set(x.s.engineId, [...(known?.get(x.s.engineId) ?? []), x.updateMs].slice(-RECENT));
    this.#updateMs.set(name, next);
  }

  /** Each member's version as read back, its record, and its quarantine (a failed member, or one that reports
   * another version than the model's, unless every update failed and it kept the model's version). */
  private commit(members: Member[], outcome: WeightSwitchOutcome, version: string | null): void {
    const write = () => {
      for (const x of members) {
        const reported = x.reported ?? null;
        x.s.weightVersion = reported;
        this.records?.weight(x.s);
        if (!x.ok && !(outcome === 'failed' && reported === version)) x.s.quarantined = true;
        if (x.ok && reported !== version) {
          x.ok = false;
          x.error ??= `reports ${reported ?? '(no answer)'} after the switch, not ${version ?? '(none)'}`;
          x.s.quarantined = true;
        }
      }
    };
    // One database transaction for the members' rows, not one per member.
    if (this.records) this.records.batch(write);
    else write();
  }

  /** An operator restart lifts a replica's quarantine: it is eligible again once its version matches. */
  release(s: Slot): void {
    if (!s.quarantined) return;
    s.quarantined = false;
    this.audit('replica.unquarantined', s.engineId, { model: s.model });
  }

  /** Drain mode: a member's requests in flight through the gateway finish (up to the deadline); requests of direct
   * clients, which the gateway cannot see end, are then paused in place with whatever is left. */
  private async waitIdle(x: Member, deadlineMs: number): Promise<void> {
    if (this.inFlight.count(x.s.engineId) === 0) return;
    // Woken by the member's last release (no polling interval in the critical path), or by the deadline.
    const stop = new AbortController();
    try {
      await Promise.race([
        this.inFlight.idle(x.s.engineId, stop.signal),
        this.clock.sleep(deadlineMs, stop.signal),
      ]);
    } finally {
      stop.abort();
    }
  }

  /** pause_generation by the switch's mode. SGLang's abort mode aborts every request in flight (their callers get
   * their partial output) and returns once none is left; in_place freezes them with their KV cache. */
  private async pause(x: Member, mode: 'abort' | 'in_place'): Promise<void> {
    try {
      // Counted before the call: a request the engine freezes is one the gateway must see as spanned.
      if (mode === 'in_place') {
        const e = this.#inPlace.get(x.s.engineId) ?? { count: 0, from: [] };
        e.count++;
        e.from.push(x.s.weightVersion);
        if (e.from.length > 16) e.from.shift();
        this.#inPlace.set(x.s.engineId, e);
      }
      await x.engine.client.pauseGeneration(mode, CONTROL);
      x.paused = true;
      x.inPlace = mode === 'in_place';
    } catch (e) {
      x.error = `pause_generation failed: ${errorMessage(e)}`;
    }
  }

  private async resume(x: Member, at: () => number): Promise<void> {
    if (!x.paused) return;
    x.paused = false;
    // Counted before the call: whatever the engine streams after it comes from the weights it continues with.
    if (x.inPlace) {
      const r = this.#resumed.get(x.s.engineId) ?? { count: 0, to: [] };
      r.count++;
      r.to.push(x.reported !== undefined ? x.reported : x.s.weightVersion);
      if (r.to.length > 16) r.to.shift();
      this.#resumed.set(x.s.engineId, r);
    }
    await x.engine.client.continueGeneration(CONTROL).catch((e: unknown) => {
      x.error ??= `continue_generation failed: ${errorMessage(e)}`;
    });
    x.at.continued = at();
  }

  /** The member's update, then its version read back (each timed for the switch's phases). */
  private async update(x: Member, req: WeightUpdate, at: () => number): Promise<void> {
    if (x.error !== undefined) return;
    const t = this.clock.now();
    try {
      await x.engine.loadWeights(req);
      x.at.loaded = at();
      x.reported = await x.engine.readBackVersion(req.weightVersion);
      x.at.readBack = at();
      x.ok = true;
    } catch (e) {
      x.error = errorMessage(e);
    }
    x.updateMs = this.clock.now() - t;
  }

  /** Puts a member that took N+1 back on N: the model's last replayable update, or its model path at N. */
  private async rollBack(x: Member, m: ModelRuntime, from: string | null): Promise<void> {
    const back: ReplayableWeightUpdate | null =
      m.replay ??
      (from === null ? null : { source: 'disk', model_path: m.spec.model_path, weight_version: from });
    try {
      if (back === null) throw new Error('the model had no version to go back to');
      x.reported = (await x.engine.updateWeights(engineWeightUpdate(back))).weightVersion;
    } catch (e) {
      x.ok = false;
      x.error = `rollback failed: ${errorMessage(e)}`;
    }
  }

  private record(
    m: ModelRuntime,
    req: ParsedWeightSwitch,
    r: {
      from: string | null;
      version: string | null;
      outcome: WeightSwitchOutcome;
      t0: number;
      startedAt: number;
      members: Member[];
      phases: Phases;
    },
  ): WeightSwitchRecord {
    const engines: EngineRow[] = r.members.map((x) => ({
      engine_id: x.s.engineId,
      ok: x.ok,
      weight_version: x.s.weightVersion,
      quarantined: x.s.quarantined,
      update_ms: x.updateMs,
      ...(x.error === undefined ? {} : { error: x.error }),
    }));
    const rec: WeightSwitchRecord = {
      id: this.#nextId++,
      model: m.spec.name,
      mode: req.mode,
      mixed_versions: req.mixed_versions,
      on_failure: req.on_failure,
      from_version: r.from,
      to_version: req.update.weight_version,
      weight_version: r.version,
      outcome: r.outcome,
      started_at: r.startedAt,
      duration_ms: this.clock.now() - r.t0,
      slowest_update_ms: Math.max(0, ...r.members.map((x) => x.updateMs ?? 0)),
      phases_ms: r.phases,
      topology_revision: this.registry.revision,
      quarantined: engines.filter((e) => e.quarantined).map((e) => e.engine_id),
      engines,
    };
    const list = this.#history.get(m.spec.name) ?? [];
    list.push(rec);
    if (list.length > HISTORY) list.shift();
    this.#history.set(m.spec.name, list);
    this.audit('model.weight_switch', m.spec.name, { ...rec }, rec.duration_ms);
    return rec;
  }
}
