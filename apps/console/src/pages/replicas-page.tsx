import { type CircuitState, type ConsoleState, REPLICA_STATES, type ReplicaView, type Role } from '@uis/spec';
import { useMemo, useState } from 'react';
import { useTRPCClient } from '../api/trpc.ts';
import { readOnlyProps, useAdminAction, useReadOnly } from '../components/admin-actions.tsx';
import { ScalePanel } from '../components/scale-panel.tsx';
import { HealthSparkline } from '../components/sparkline.tsx';
import { BoolMark, StateBadge } from '../components/state-badge.tsx';
import { ModelSwitches } from '../components/weight-switch-timeline.tsx';
import { activatedMessage, drainedMessage, restartedMessage } from '../lib/action-messages.ts';
import { roleColor } from '../lib/colors.ts';

/** One model of a role's discovery snapshot, as the console state carries it. */
type ModelInfo = ConsoleState['roles'][number]['models'][string];

type SortKey = 'engine_id' | 'state' | 'inflight' | 'weight_version' | 'health';

const STATE_ORDER = new Map(REPLICA_STATES.map((s, i) => [s, i]));

/** The replica's generation, shown as what it counts: its engine process was started again. */
const RESTARTS_TITLE =
  "times this replica's engine process was started again, after it died or an operator restarted it (0: still its first process)";

function failures(r: ReplicaView): number {
  return r.health.filter((h) => !h.ok).length;
}

function compare(a: ReplicaView, b: ReplicaView, key: SortKey): number {
  switch (key) {
    case 'engine_id':
      return a.engine_id.localeCompare(b.engine_id, undefined, { numeric: true });
    case 'state':
      return (STATE_ORDER.get(a.state) ?? 0) - (STATE_ORDER.get(b.state) ?? 0);
    case 'inflight':
      return a.inflight - b.inflight;
    case 'weight_version':
      return (a.weight_version ?? '').localeCompare(b.weight_version ?? '', undefined, { numeric: true });
    case 'health':
      return failures(a) - failures(b);
  }
}

/** A replica serving other weights than its model's target (it must sync before it is eligible again). */
export function behind(version: string | null, target: string | null | undefined): boolean {
  return target !== null && target !== undefined && version !== target;
}

export function filterReplicas(replicas: ReplicaView[], text: string, state: string): ReplicaView[] {
  const needle = text.trim().toLowerCase();
  return replicas.filter(
    (r) =>
      (state === '' || r.state === state) &&
      (needle === '' ||
        [
          r.engine_id,
          r.model,
          r.role,
          r.base_url ?? '',
          r.state,
          r.weight_version ?? '',
          r.sglang_version ?? '',
          r.circuit ?? '',
        ].some((v) => v.toLowerCase().includes(needle))),
  );
}

function ModelActions({ role, model }: { role: Role; model: string }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  return (
    <span className="inline-actions">
      <button
        type="button"
        data-testid="drain-model"
        {...readOnlyProps(readOnly)}
        data-model={model}
        onClick={() =>
          request({
            title: `Drain ${role}/${model}`,
            description: `Every replica of ${model} stops taking new work (direct_eligible false), finishes in-flight requests, flushes its cache and releases GPU memory (sleeping). The model is held: phase changes leave it asleep, and requests get 503, until it is activated here.`,
            run: async () =>
              drainedMessage(`${role}/${model}`, (await client.drainModel.mutate({ role, model })).result),
          })
        }
      >
        Drain
      </button>
      <button
        type="button"
        data-testid="activate-model"
        {...readOnlyProps(readOnly)}
        data-model={model}
        onClick={() =>
          request({
            title: `Activate ${role}/${model}`,
            description: `The replicas of ${model} resume GPU memory, sync weights to the target version and become ready; a hold from a drain is lifted.`,
            run: async () =>
              activatedMessage(
                `${role}/${model}`,
                (await client.activateModel.mutate({ role, model })).result,
              ),
          })
        }
      >
        Activate
      </button>
    </span>
  );
}

function RestartButton({ role, engineId }: { role: Role; engineId: string }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  return (
    <button
      type="button"
      className="small"
      data-testid="restart-replica"
      {...readOnlyProps(readOnly)}
      onClick={() =>
        request({
          title: `Restart ${engineId}`,
          description: `The engine process of ${engineId} is stopped and started again (a new generation); it serves again once healthy and at the model's weight version.`,
          run: async () =>
            restartedMessage((await client.restartReplica.mutate({ role, engine_id: engineId })).result),
        })
      }
    >
      Restart
    </button>
  );
}

/** The gateway's circuit of a replica: closed is the quiet normal, open and half-open stand out; none for a
 * model an SGLang router serves (the router picks its workers). */
export function CircuitMark({ circuit }: { circuit: CircuitState | null }) {
  if (circuit === null)
    return (
      <span
        className="muted"
        data-testid="replica-circuit"
        data-circuit="none"
        title="routed by an SGLang router"
      >
        —
      </span>
    );
  const title =
    circuit === 'open'
      ? 'open: consecutive failures; routing skips this replica until one request probes it'
      : circuit === 'half_open'
        ? 'half-open: one request probes the replica; success closes the circuit, failure opens it again'
        : 'closed: routed to';
  return (
    <span
      className={circuit === 'closed' ? 'muted' : `badge badge-circuit-${circuit}`}
      data-testid="replica-circuit"
      data-circuit={circuit}
      title={title}
    >
      {circuit === 'half_open' ? 'half-open' : circuit}
    </span>
  );
}

/** One replica's row: identity, state, eligibility, weights (marked when behind the model's target), load and
 * health, and its restart action. */
function ReplicaRow({ r, target }: { r: ReplicaView; target: string | null }) {
  const stale = behind(r.weight_version, target);
  return (
    <tr
      data-testid="replica-row"
      data-engine-id={r.engine_id}
      data-state={r.state}
      data-direct-eligible={String(r.direct_eligible)}
    >
      <td className="mono">
        {r.engine_id}
        {r.worker_type !== 'regular' && <span className="muted"> ({r.worker_type})</span>}
      </td>
      <td className="mono url">{r.base_url ?? '—'}</td>
      <td>
        <StateBadge state={r.state} />
      </td>
      <td>
        <BoolMark value={r.direct_eligible} />
      </td>
      <td
        className={`mono${stale ? ' stale' : ''}`}
        data-testid="replica-weights"
        data-behind={stale ? 'true' : 'false'}
        title={stale ? `behind the model's target ${target}: not eligible until synced` : undefined}
      >
        {r.weight_version ?? '—'}
      </td>
      <td className="mono" data-testid="replica-sglang" title="the SGLang release the engine reports">
        {r.sglang_version ?? '—'}
      </td>
      <td className="num mono">{r.inflight}</td>
      <td className="num mono" data-testid="replica-restarts">
        {r.generation}
      </td>
      <td>
        <CircuitMark circuit={r.circuit} />
      </td>
      <td>
        <HealthSparkline samples={r.health} />
      </td>
      <td>
        <RestartButton role={r.role} engineId={r.engine_id} />
      </td>
    </tr>
  );
}

/** A model's heading: its state, the operator hold, its target weights, replica count and router, its actions. */
function ModelHead({
  role,
  model,
  info,
  total,
}: {
  role: Role;
  model: string;
  info: ModelInfo;
  total: number;
}) {
  return (
    <div className="model-head">
      <strong className="mono">{model}</strong> <StateBadge state={info.state} />
      {info.held ? (
        <>
          {' '}
          <span
            className="badge badge-held"
            data-testid="held-badge"
            title="Drained by an operator: phase changes leave it asleep until it is activated"
          >
            held
          </span>
        </>
      ) : null}
      <span className="muted">
        {' '}
        target weights {info.weight_version ?? '—'} · {total} replicas
        {info.router_url ? ` · router ${info.router_url}` : ''}
      </span>
      <ModelActions role={role} model={model} />
      <ScalePanel role={role} model={model} replicas={total} />
    </div>
  );
}

export function ReplicasPage({ state, initialFilter = '' }: { state: ConsoleState; initialFilter?: string }) {
  const [text, setText] = useState(initialFilter);
  const [stateFilter, setStateFilter] = useState('');
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: 'engine_id', desc: false });
  const shown = useMemo(() => {
    const list = filterReplicas(state.replicas, text, stateFilter);
    return list.sort((a, b) => (sort.desc ? -1 : 1) * compare(a, b, sort.key));
  }, [state.replicas, text, stateFilter, sort]);

  const header = (key: SortKey, label: string, numeric = false) => (
    <th
      className={numeric ? 'num' : undefined}
      aria-sort={sort.key === key ? (sort.desc ? 'descending' : 'ascending') : 'none'}
    >
      <button
        type="button"
        className="sort"
        onClick={() => setSort((s) => ({ key, desc: s.key === key ? !s.desc : false }))}
        data-testid={`sort-${key}`}
      >
        {label}
        {sort.key === key ? (sort.desc ? ' ▼' : ' ▲') : ''}
      </button>
    </th>
  );

  return (
    <div className="page" data-testid="page-replicas">
      <div className="toolbar">
        <input
          type="search"
          placeholder="filter: engine, model, URL, state, version, circuit"
          aria-label="filter replicas"
          value={text}
          onChange={(e) => setText(e.target.value)}
          data-testid="replica-filter"
        />
        <select
          aria-label="state"
          value={stateFilter}
          onChange={(e) => setStateFilter(e.target.value)}
          data-testid="replica-state-filter"
        >
          <option value="">all states</option>
          {REPLICA_STATES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <span className="muted">
          {shown.length} of {state.replicas.length} replicas
        </span>
      </div>
      {state.roles.length === 0 && <p className="empty">No role is configured.</p>}
      {state.roles.map((snapshot) => (
        <section className="card" key={snapshot.role} data-testid="role-section" data-role={snapshot.role}>
          <header className="card-head">
            <h2>
              <span className="role-dot" style={{ background: roleColor(snapshot.role) }} />
              {snapshot.role}
            </h2>
            <dl className="facts facts-inline">
              <dt>topology revision</dt>
              <dd data-testid="topology-revision">{snapshot.topology_revision}</dd>
              <dt>registry epoch</dt>
              <dd className="mono">{snapshot.registry_epoch ?? '—'}</dd>
              <dt>phase</dt>
              <dd>{snapshot.phase ?? '—'}</dd>
            </dl>
          </header>
          {Object.entries(snapshot.models).map(([model, info]) => {
            const rows = shown.filter((r) => r.role === snapshot.role && r.model === model);
            const total = state.replicas.filter((r) => r.role === snapshot.role && r.model === model).length;
            return (
              <div className="model-block" key={model} data-testid="model-section" data-model={model}>
                <ModelHead role={snapshot.role} model={model} info={info} total={total} />
                {rows.length === 0 ? (
                  <p className="empty">{total === 0 ? 'No replica.' : 'No replica matches the filter.'}</p>
                ) : (
                  <table className="table" data-testid="replica-table">
                    <thead>
                      <tr>
                        {header('engine_id', 'engine')}
                        <th>URL</th>
                        {header('state', 'state')}
                        <th>direct</th>
                        {header('weight_version', 'weights')}
                        <th title="the SGLang release each engine reports (its server info version)">
                          SGLang
                        </th>
                        {header('inflight', 'in-flight', true)}
                        <th className="num" title={RESTARTS_TITLE} data-testid="replica-restarts-head">
                          restarts
                        </th>
                        <th title="the gateway's circuit breaker of the replica">circuit</th>
                        {header('health', 'health')}
                        <th />
                      </tr>
                    </thead>
                    <tbody>
                      {rows.map((r) => (
                        <ReplicaRow key={r.engine_id} r={r} target={info.weight_version ?? null} />
                      ))}
                    </tbody>
                  </table>
                )}
                <ModelSwitches role={snapshot.role} model={model} />
              </div>
            );
          })}
        </section>
      ))}
    </div>
  );
}
