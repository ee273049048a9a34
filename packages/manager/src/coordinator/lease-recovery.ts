import type { GroupLease } from './group-lease.ts';
import type { PhaseParticipant } from './types.ts';

/** What a restart does about a transition the previous process left unfinished. */
export type LeaseRecovery =
  | { outcome: 'none' }
  | { outcome: 'resume'; target: string }
  | { outcome: 'blocked'; engines: string[] };

/**
 * Decides about the transition a restarted group found cut short (`GroupLease.interrupted`). Its lease is blocked
 * at construction; it recovers by itself when every engine of the roles that share the group's GPUs has a known
 * memory state (no participant names an engine in doubt, see `PhaseParticipant.memoryInDoubt`): the lease moves
 * `recover` (held at the phase it was leaving) and the caller runs the transition again to its target, which drains
 * every other role with the usual proof before it onloads. Otherwise it stays blocked and its reason names each
 * engine to check.
 */
export function decideLeaseRecovery(
  g: GroupLease,
  participants: ReadonlyMap<string, PhaseParticipant>,
): LeaseRecovery {
  const cut = g.interrupted;
  if (!cut || g.lease.status !== 'blocked') return { outcome: 'none' };
  g.interrupted = null;
  const engines = [...participants.values()]
    .filter((p) => g.includes(p.role))
    .flatMap((p) => (p.memoryInDoubt?.() ?? []).map((d) => `${p.role} ${d}`));
  if (engines.length > 0) {
    const reason = `manager restarted during a transition to ${cut.target}; the GPU memory of these engines is not known: ${engines.join('; ')}. Check them, then resolve the lease`;
    g.move(
      'block',
      { reason, target: cut.target },
      { actor: 'system', kind: 'lease.blocked', data: { reason, engines } },
    );
    return { outcome: 'blocked', engines };
  }
  g.move(
    'recover',
    { phase: cut.phase, holder: [] },
    { actor: 'system', kind: 'lease.recovered', data: { phase: cut.phase, target: cut.target } },
  );
  return { outcome: 'resume', target: cut.target };
}
