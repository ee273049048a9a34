/** What the weight-version metrics read of a role's manager (its snapshot). */
export interface WeightSnapshotSource {
  snapshot(): {
    models: Record<
      string,
      {
        target_weight_version: string | null;
        replicas: Array<{ engine_id: string; state: string; weight_version: string | null }>;
      }
    >;
  };
}

export interface ReplicaWeightRow {
  role: string;
  model: string;
  engine_id: string;
  weight_version: string;
  /** Versions between the replica's and its model's target (0: at the target). */
  behind: number;
}

/** Keeps the order in which each model's target weight versions were seen, so a replica's lag counts versions
 * (how many updates it missed), not just whether it differs. Bounded per model. */
export class WeightVersionHistory {
  readonly #seen = new Map<string, string[]>();

  constructor(private readonly limit = 1000) {}

  /** A model's target moved to `version` (repeats and an unknown `null` target are ignored). */
  target(role: string, model: string, version: string | null): void {
    if (version === null) return;
    const key = `${role}\u0000${model}`;
    const list = this.#seen.get(key) ?? [];
    this.#seen.set(key, list);
    if (list[list.length - 1] === version) return;
    list.push(version);
    if (list.length > this.limit) list.shift();
  }

  /** Records a weight update's target as it happens (between scrapes several may come). */
  observe(e: { kind: string; actor: string | null; subject: string; data: Record<string, unknown> }): void {
    if (e.kind === 'admin.update_weights' && e.actor !== null && typeof e.data.target === 'string')
      this.target(e.actor, e.subject, e.data.target);
  }

  /** Versions `version` trails `target`: 0 when equal; the distance in the history when both are in it; the whole
   * history's length when the replica's version is older than anything remembered (or unknown). */
  behind(role: string, model: string, version: string | null, target: string | null): number {
    if (target === null || version === target) return 0;
    const list = this.#seen.get(`${role}\u0000${model}`) ?? [];
    const t = list.lastIndexOf(target);
    const v = version === null ? -1 : list.lastIndexOf(version);
    if (t < 0) return 1;
    if (v < 0) return Math.max(1, t + 1);
    return Math.max(0, t - v);
  }

  /** Rows for every live replica of every role's models; also records each model's current target. */
  rows(managers: Iterable<readonly [string, WeightSnapshotSource]>): ReplicaWeightRow[] {
    const out: ReplicaWeightRow[] = [];
    for (const [role, m] of managers)
      for (const [model, x] of Object.entries(m.snapshot().models)) {
        this.target(role, model, x.target_weight_version);
        for (const r of x.replicas) {
          if (r.state === 'dead') continue;
          out.push({
            role,
            model,
            engine_id: r.engine_id,
            weight_version: r.weight_version ?? '',
            behind: this.behind(role, model, r.weight_version, x.target_weight_version),
          });
        }
      }
    return out;
  }
}
