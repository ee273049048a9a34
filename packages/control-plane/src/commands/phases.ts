import { z } from 'zod';
import { admin, GroupOf, None, servingRead } from './common.ts';
import { defineCommand } from './define.ts';
import { LeaseSchema, leaseView, TransitionResultSchema } from './wire.ts';

/** Activation groups: phases advanced, a blocked lease resolved, and the trainer's barriers. */
export const phaseCommands = {
  list_phases: defineCommand({
    ...servingRead,
    name: 'list_phases',
    summary: 'The activation lease of every group',
    method: 'GET',
    path: '/phases',
    params: None,
    input: None,
    output: z.object({ leases: z.array(LeaseSchema) }),
    handler: (plane) => ({ leases: plane.coordinator.leases().map(leaseView) }),
  }),
  advance_phase: defineCommand({
    ...admin,
    name: 'advance_phase',
    summary: 'Move an activation group to its next phase (or to `to`): drain, release memory, onload',
    method: 'POST',
    path: '/phases/advance',
    params: None,
    input: z.strictObject({ group: GroupOf, to: z.string().min(1).optional() }),
    output: TransitionResultSchema,
    audit: { subject: ({ input }, plane) => plane.coordinator.groupName(input.group) ?? 'default' },
    handler: (plane, { input }, ctx) =>
      plane.coordinator.transition({
        ...(input.group === undefined ? {} : { group: input.group }),
        ...(input.to === undefined ? {} : { to: input.to }),
        actor: ctx.actor,
      }),
  }),
  resolve_lease: defineCommand({
    ...admin,
    name: 'resolve_lease',
    summary:
      'Unblock a blocked lease: the engines are brought to `phase` (the others drained with proof, its residents onloaded), or the lease is blocked again naming the engines that contradict it',
    method: 'POST',
    path: '/phases/resolve',
    params: None,
    input: z.strictObject({ group: GroupOf, phase: z.string().min(1), note: z.string().optional() }),
    output: LeaseSchema,
    audit: { subject: ({ input }, plane) => plane.coordinator.groupName(input.group) ?? 'default' },
    handler: async (plane, { input }, ctx) =>
      leaseView(
        await plane.coordinator.resolve({
          phase: input.phase,
          actor: ctx.actor,
          ...(input.group === undefined ? {} : { group: input.group }),
          ...(input.note === undefined ? {} : { note: input.note }),
        }),
      ),
  }),
  wait_barrier: defineCommand({
    ...servingRead,
    name: 'wait_barrier',
    summary: 'Wait (up to timeout_s) until `phase` is resident; the trainer blocks here',
    method: 'POST',
    path: '/barriers/wait',
    waitsUpTo: 'timeout_s',
    params: None,
    input: z.strictObject({
      phase: z.string().min(1),
      group: GroupOf,
      timeout_s: z.number().positive().max(3600).default(600),
    }),
    output: LeaseSchema,
    handler: async (plane, { input }, ctx) =>
      leaseView(
        await plane.barriers.wait(input.group ?? null, input.phase, () =>
          // A trainer that gives up (disconnects) stops counting as a waiter at once.
          plane.coordinator.waitForPhase(input.phase, input.timeout_s * 1000, input.group, ctx.signal),
        ),
      ),
  }),
  release_barrier: defineCommand({
    ...admin,
    name: 'release_barrier',
    summary: 'The trainer is done with `phase`: move the group on (e.g. train -> rollout)',
    method: 'POST',
    path: '/barriers/release',
    params: None,
    input: z.strictObject({ phase: z.string().min(1), group: GroupOf }),
    output: TransitionResultSchema,
    audit: {
      subject: ({ input }, plane) =>
        `${plane.coordinator.groupName(input.group) ?? 'default'}/${input.phase}`,
    },
    handler: (plane, { input }, ctx) =>
      plane.coordinator.releasePhase(input.phase, {
        ...(input.group === undefined ? {} : { group: input.group }),
        actor: ctx.actor,
      }),
  }),
};
