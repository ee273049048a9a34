import type { AuditEvent } from '@uis/manager';
import type { DiscoverySnapshot, Role } from '@uis/spec';
import type { BarrierWait } from './barrier-board.ts';

/** One change of the running control plane, as the console and its time series see it. */
export type ControlPlaneEvent =
  /** A durable audit event was written (transitions, leases, operator commands, replica deaths ...). */
  | { type: 'audit'; event: AuditEvent }
  /** A role published a new topology (replica states, eligibility, weight versions). */
  | { type: 'topology'; role: Role; snapshot: DiscoverySnapshot }
  /** The trainers waiting at barriers changed. */
  | { type: 'barriers'; barriers: BarrierWait[] }
  /** Batches are being scored: sent about once a second while any runs (scoring logs nothing until it commits). */
  | { type: 'batches'; running: number };

export type ControlPlaneListener = (event: ControlPlaneEvent) => void;

/** A typed, synchronous fan-out of the control plane's changes. A faulty listener never stops the others. */
export class ControlPlaneStream {
  private readonly listeners = new Set<ControlPlaneListener>();

  /** Calls `listener` with every later change; returns the unsubscribe function. */
  subscribe(listener: ControlPlaneListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** How many listeners are subscribed (producers skip work nobody reads). */
  get size(): number {
    return this.listeners.size;
  }

  emit(event: ControlPlaneEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(event);
      } catch {
        // A listener's own failure is its business: the next listener still hears the change.
      }
    }
  }
}
