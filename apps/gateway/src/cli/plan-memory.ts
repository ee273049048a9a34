import {
  formatBytes,
  type GroupMemoryPlan,
  type ModelMove,
  type SchedulePrediction,
  type SwitchPlan,
} from '@uis/spec';

/** `uis plan`'s memory sections: per phase the resident weights and the fullest GPU, per switch the tags released
 * and resumed, bytes moved and predicted seconds; `--compare` puts the configured and the optimized order side by
 * side. */

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => cell.padEnd(widths[c] ?? 0))
      .join('  ')
      .trimEnd();
  return `${[line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n')}\n`;
}

const seconds = (s: number) => `${s.toFixed(2)} s`;

function tags(moves: readonly ModelMove[], pick: (m: ModelMove) => readonly string[], sync: boolean): string {
  const parts = moves.flatMap((m) => {
    const list = [...pick(m), ...(sync && m.weight_sync ? ['sync'] : [])];
    return list.length === 0 ? [] : [`${m.model}: ${list.join('+')}`];
  });
  return parts.length === 0 ? '-' : parts.join(', ');
}

function switchRow(s: SwitchPlan): string[] {
  return [
    `${s.from} -> ${s.to}`,
    tags(s.moves, (m) => m.release, false),
    tags(s.moves, (m) => m.resume, true),
    formatBytes(s.bytes_moved),
    seconds(s.predicted_s),
  ];
}

function schedule(p: SchedulePrediction): string {
  const phases = table(
    ['PHASE', 'RESIDENTS', 'RESIDENT WEIGHTS', 'FULLEST GPU'],
    p.phases.map((ph) => [
      ph.name,
      ph.residents.join(', '),
      ph.resident_weights.join(', ') || '-',
      `${formatBytes(ph.peak_bytes)} of ${formatBytes(ph.capacity_bytes)}`,
    ]),
  );
  const switches =
    p.switches.length === 0
      ? ''
      : `\n${table(['SWITCH', 'RELEASES', 'RESUMES (in order)', 'BYTES MOVED', 'PREDICTED'], p.switches.map(switchRow))}`;
  return `${phases}${switches}`;
}

function unsized(g: GroupMemoryPlan): string {
  return g.unsized.length === 0
    ? ''
    : `not sized (no memory section; every switch releases all they hold): ${g.unsized.join(', ')}\n`;
}

/** The memory section of `uis plan`: the order in use. */
export function renderMemory(groups: readonly GroupMemoryPlan[]): string {
  return groups
    .map((g) => {
      const used = g.order === 'optimized' ? g.optimized : g.configured;
      return `\nmemory of activation group ${g.group} (order ${g.order}): predicted switch time ${seconds(used.bubble_s)} per step (${seconds(g.release_all.bubble_s)} if every switch released everything)\n${unsized(g)}${schedule(used)}`;
    })
    .join('');
}

/** `uis plan --compare`: configured and optimized order side by side, then the optimized one in full when it
 * differs (the memory section already shows the order in use). */
export function renderCompare(groups: readonly GroupMemoryPlan[]): string {
  if (groups.length === 0) return '\nno activation group: nothing switches, nothing to compare\n';
  return groups
    .map((g) => {
      const { configured: c, optimized: o } = g;
      const rows = Math.max(c.switches.length, o.switches.length);
      const side = Array.from({ length: rows }, (_, i) => {
        const a = c.switches[i];
        const b = o.switches[i];
        return [
          a ? `${a.from} -> ${a.to}` : '',
          a ? seconds(a.predicted_s) : '',
          b ? `${b.from} -> ${b.to}` : '',
          b ? seconds(b.predicted_s) : '',
        ];
      });
      side.push(['per step', seconds(c.bubble_s), 'per step', seconds(o.bubble_s)]);
      const saved = c.bubble_s - o.bubble_s;
      const verdict =
        saved > 0
          ? `optimized saves ${seconds(saved)} per step${g.order === 'optimized' ? ' (in use: schedule.defer.order is optimized)' : '; set schedule.defer.order: optimized to use it'}`
          : 'the configured order is already the best';
      const same = c.phases.map((p) => p.name).join() === o.phases.map((p) => p.name).join();
      return `\ncompare activation group ${g.group}: ${verdict}\n${table(['CONFIGURED', 'PREDICTED', 'OPTIMIZED', 'PREDICTED'], side)}${same ? '' : `\noptimized order:\n${schedule(o)}`}`;
    })
    .join('');
}
