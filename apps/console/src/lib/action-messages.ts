import type { AppOutput } from '../api/app-router.ts';

/** What an operator reads after an action: one line from the command's result (the gateway answers data, the
 * console words it). */

type Result<K extends 'drainModel' | 'activateModel' | 'advancePhase' | 'resolveLease' | 'restartReplica'> =
  AppOutput<K>['result'];

export function drainedMessage(name: string, r: Result<'drainModel'>): string {
  return `${name} drained (${r.engines.length} replicas, memory released: ${r.memory_released})`;
}

export function activatedMessage(name: string, r: Result<'activateModel'>): string {
  const w = r.waits_for;
  if (r.onloaded || w === undefined) return `${name} activated`;
  return `${name} released: it onloads with phase ${w.phases.join(' or ')} (${w.group} is in ${w.phase ?? 'no phase'} now)`;
}

export function advancedMessage(r: Result<'advancePhase'>): string {
  return `${r.group}: ${r.from ?? '(none)'} -> ${r.path.join(' -> ')} in ${Math.round(r.duration_ms)} ms`;
}

export function resolvedMessage(l: Result<'resolveLease'>): string {
  return `${l.group}: lease resolved at ${l.phase}, held by ${l.holder.join(', ') || 'nobody'}`;
}

export function restartedMessage(r: Result<'restartReplica'>): string {
  return r.restarted
    ? `${r.engine_id} restarted`
    : `${r.engine_id} stopped; it relaunches when its model onloads (the model is asleep)`;
}
