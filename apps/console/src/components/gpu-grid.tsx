import type { CSSProperties } from 'react';
import { roleColor } from '../lib/colors.ts';
import { type GridBlock, type GridModel, gpuKey } from '../lib/gpu-grid.ts';

const LABEL_COL = 1;

function laneTitle(lane: GridModel['lanes'][number]): string {
  if (lane.group === null) return 'always resident';
  return `${lane.group} · phase ${lane.phase ?? '?'}`;
}

function blockLabel(b: GridBlock): string {
  if (b.kind === 'train') return 'train';
  if (b.kind === 'placeholder') return `${b.role}/${b.model} reserved`;
  return b.engineId ?? `${b.role}/${b.model}`;
}

function blockTitle(b: GridBlock, nodes: GridModel['nodes']): string {
  const where =
    b.nodeStart === b.nodeEnd
      ? `${nodes[b.nodeStart]?.name} GPUs ${b.gpuStart}-${b.gpuEnd}`
      : `${nodes[b.nodeStart]?.name}..${nodes[b.nodeEnd]?.name} GPUs ${b.gpuStart}-${b.gpuEnd} on each`;
  const parts = [blockLabel(b), `${b.role}${b.model ? ` / ${b.model}` : ''}`, where];
  if (b.parallel) parts.push(b.parallel);
  if (b.state) parts.push(`state ${b.state}`);
  if (b.weightVersion) parts.push(`weights ${b.weightVersion}`);
  if (b.kind === 'planned') parts.push('planned location (the replica runs elsewhere)');
  else if (b.mismatch) parts.push('NOT where the plan put it');
  return parts.join('\n');
}

/** Physical view: one cell per GPU, a band per phase that uses it, coloured by the owning role/model. */
export function GpuMatrix({ grid }: { grid: GridModel }) {
  return (
    <div className="gpu-matrix" data-testid="gpu-matrix">
      {grid.nodes.map((node) => (
        <div className="gpu-matrix-row" key={node.name} data-testid="gpu-node" data-node={node.name}>
          <div className="gpu-matrix-label">{node.name}</div>
          {Array.from({ length: node.gpus }, (_, gpu) => {
            const owners = grid.owners.get(gpuKey(node.name, gpu)) ?? [];
            const ownerText = owners
              .map(
                (o) =>
                  `${o.model ? `${o.role}/${o.model}` : o.role}@${grid.lanes[o.lane]?.phase ?? 'resident'}`,
              )
              .join(' ');
            return (
              <div
                className="gpu-cell"
                key={gpu}
                data-testid="gpu"
                data-node={node.name}
                data-gpu={gpu}
                data-owners={ownerText}
                data-roles={[...new Set(owners.map((o) => o.role))].join(' ')}
                title={`${node.name} GPU ${gpu}\n${owners.map((o) => `${grid.lanes[o.lane]?.phase ?? 'resident'}: ${o.role}${o.model ? `/${o.model}` : ''}${o.current ? ' (current)' : ''}`).join('\n') || 'unused'}`}
              >
                <span className="gpu-id">{gpu}</span>
                <div className="gpu-bands">
                  {owners.length === 0 && <div className="gpu-band gpu-band-free" />}
                  {owners.map((o) => (
                    <div
                      key={`${o.lane}-${o.role}-${o.model}`}
                      className={`gpu-band${o.current || !grid.live ? ' gpu-band-current' : ''}`}
                      style={{ background: roleColor(o.role, o.modelIndex) }}
                    />
                  ))}
                </div>
              </div>
            );
          })}
        </div>
      ))}
    </div>
  );
}

/** Placement view: a lane per phase, node rows x GPU columns, one block per replica (multi-node engines span
 * their node rows as one block); a replica that runs elsewhere than planned is outlined, with its planned
 * place drawn as a dashed ghost. */
export function PlacementLanes({
  grid,
  replicaHref,
}: {
  grid: GridModel;
  replicaHref?: (engineId: string) => string;
}) {
  const n = grid.nodes.length;
  const rowsPerLane = n + 1;
  const laneHeaderRow = (lane: number) => 2 + lane * rowsPerLane;
  // Header row, then per lane a short title row and one row per node.
  const laneRows = `24px repeat(${n}, minmax(38px, auto))`;
  const style: CSSProperties = {
    gridTemplateColumns: `minmax(72px, max-content) repeat(${grid.maxGpus}, minmax(44px, 1fr))`,
    gridTemplateRows: `18px ${grid.lanes.map(() => laneRows).join(' ')}`,
  };
  return (
    <div className="lanes" style={style} data-testid="placement-lanes">
      <div className="lanes-corner" style={{ gridRow: 1, gridColumn: LABEL_COL }}>
        GPU
      </div>
      {Array.from({ length: grid.maxGpus }, (_, g) => (
        <div key={`h${g}`} className="lanes-gpu-head" style={{ gridRow: 1, gridColumn: g + 2 }}>
          {g}
        </div>
      ))}
      {grid.lanes.map((lane, li) => (
        <LaneRows key={lane.key} grid={grid} lane={li} headerRow={laneHeaderRow(li)} />
      ))}
      {grid.blocks.map((b) => {
        const row = laneHeaderRow(b.lane) + 1 + b.nodeStart;
        // A plan alone has no current phase: every block is drawn at full strength.
        const current = (grid.lanes[b.lane]?.current ?? false) || !grid.live;
        const classes = [
          'block',
          `block-${b.kind}`,
          current ? 'block-current' : '',
          b.mismatch && b.kind === 'replica' ? 'block-mismatch' : '',
          b.state ? `block-state-${b.state}` : '',
        ]
          .filter(Boolean)
          .join(' ');
        const blockStyle: CSSProperties = {
          gridRow: `${row} / span ${b.nodeEnd - b.nodeStart + 1}`,
          gridColumn: `${b.gpuStart + 2} / span ${b.gpuEnd - b.gpuStart + 1}`,
          // Blocks of phases not holding the lease are pale (text stays dark and legible).
          ...(b.kind === 'planned'
            ? {}
            : { backgroundColor: roleColor(b.role, b.modelIndex, current || b.mismatch ? 1 : 0.3) }),
          ...(b.kind === 'planned' ? { borderColor: roleColor(b.role, b.modelIndex) } : {}),
        };
        // Live replicas link to their row on the Replicas page.
        const Tag = replicaHref && b.kind === 'replica' && b.engineId ? 'a' : 'div';
        return (
          <Tag
            key={b.key}
            {...(Tag === 'a' && b.engineId ? { href: replicaHref?.(b.engineId) } : {})}
            className={classes}
            style={blockStyle}
            title={blockTitle(b, grid.nodes)}
            data-testid={b.kind === 'replica' ? 'replica-block' : `${b.kind}-block`}
            data-engine-id={b.engineId ?? undefined}
            data-role={b.role}
            data-model={b.model ?? undefined}
            data-state={b.state ?? undefined}
            data-mismatch={b.mismatch ? 'true' : 'false'}
            data-node-span={b.nodeEnd - b.nodeStart + 1}
            data-lane={grid.lanes[b.lane]?.phase ?? 'resident'}
          >
            <span className="block-name">{blockLabel(b)}</span>
            {b.kind === 'replica' && (
              <span className="block-meta">
                {grid.live ? (b.state ?? 'unknown') : b.parallel}
                {grid.live && b.weightVersion ? ` · ${b.weightVersion}` : ''}
                {b.nodeEnd > b.nodeStart ? ` · ${b.nodeEnd - b.nodeStart + 1} nodes` : ''}
              </span>
            )}
            {b.kind === 'replica' && b.mismatch && (
              <span className="block-flag" data-testid="mismatch-flag">
                not where planned
              </span>
            )}
            {b.kind === 'planned' && <span className="block-meta">planned here</span>}
          </Tag>
        );
      })}
    </div>
  );
}

function LaneRows({ grid, lane, headerRow }: { grid: GridModel; lane: number; headerRow: number }) {
  const l = grid.lanes[lane]!;
  return (
    <>
      <div
        className={`lane-head${l.current ? ' lane-head-current' : ''}`}
        style={{ gridRow: headerRow, gridColumn: '1 / -1' }}
        data-testid="lane"
        data-phase={l.phase ?? 'resident'}
        data-current={l.current ? 'true' : 'false'}
      >
        <strong>{laneTitle(l)}</strong>
        {l.residents.length > 0 && <span className="muted"> · residents {l.residents.join(', ')}</span>}
        {l.current && <span className="pill pill-current">current phase</span>}
      </div>
      {grid.nodes.map((node, ni) => (
        <NodeRow key={node.name} grid={grid} node={ni} row={headerRow + 1 + ni} />
      ))}
    </>
  );
}

function NodeRow({ grid, node, row }: { grid: GridModel; node: number; row: number }) {
  const info = grid.nodes[node]!;
  return (
    <>
      <div className="lane-node" style={{ gridRow: row, gridColumn: LABEL_COL }}>
        {info.name}
      </div>
      {Array.from({ length: grid.maxGpus }, (_, g) => (
        <div
          key={g}
          className={g < info.gpus ? 'slot' : 'slot slot-absent'}
          style={{ gridRow: row, gridColumn: g + 2 }}
        />
      ))}
    </>
  );
}

export function RoleLegend({
  roles,
}: {
  roles: Array<{ role: string; model: string | null; modelIndex: number }>;
}) {
  return (
    <div className="legend" data-testid="legend">
      {roles.map((r) => (
        <span key={`${r.role}/${r.model}`} className="legend-item">
          <span className="legend-swatch" style={{ background: roleColor(r.role, r.modelIndex) }} />
          {r.model ? `${r.role} / ${r.model}` : r.role}
        </span>
      ))}
      <span className="legend-item">
        <span className="legend-swatch legend-mismatch" /> not where planned
      </span>
    </div>
  );
}

export function GpuGrid({
  grid,
  replicaHref,
}: {
  grid: GridModel;
  replicaHref?: (engineId: string) => string;
}) {
  const seen = new Map<string, { role: string; model: string | null; modelIndex: number }>();
  for (const b of grid.blocks) {
    if (b.kind === 'planned') continue;
    seen.set(`${b.role}/${b.model}`, { role: b.role, model: b.model, modelIndex: b.modelIndex });
  }
  return (
    <div className="gpu-grid" data-testid="gpu-grid">
      <RoleLegend roles={[...seen.values()]} />
      <GpuMatrix grid={grid} />
      <PlacementLanes grid={grid} {...(replicaHref ? { replicaHref } : {})} />
      {grid.unplaced.length > 0 && (
        <p className="muted" data-testid="unplaced">
          Not on the grid (no planned GPUs): {grid.unplaced.join(', ')}
        </p>
      )}
    </div>
  );
}
