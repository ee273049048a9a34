import { UisError } from '@uis/spec';
import { z } from 'zod';
import { ModelReplicaSchema, ModelReplicasSchema, modelReplicas } from '../model-replicas.ts';
import { admin, Engine, engineSubject, modelSubject, None, Role, RoleModel, servingRead } from './common.ts';
import { defineCommand } from './define.ts';

/** Replicas: external engines attached and detached, a replica restarted, a model's replicas listed or one read. */
export const replicaCommands = {
  register_external: defineCommand({
    ...admin,
    name: 'register_external',
    summary: 'Attach an engine started elsewhere to a model, by URL',
    method: 'POST',
    path: '/roles/:role/models/:model/engines',
    params: RoleModel,
    input: z.strictObject({ url: z.string().min(1) }),
    output: z.object({ engine_id: z.string() }),
    audit: modelSubject,
    handler: (plane, { params, input }) =>
      plane.managerOf(params.role).registerExternal(params.model, input.url),
  }),
  unregister_external: defineCommand({
    ...admin,
    name: 'unregister_external',
    summary: 'Detach an external engine (it keeps running)',
    method: 'POST',
    path: '/roles/:role/engines/unregister',
    params: Role,
    input: Engine,
    output: z.object({ engine_id: z.string(), unregistered: z.literal(true) }),
    audit: engineSubject,
    handler: async (plane, { params, input }) => {
      await plane.managerOf(params.role).unregisterExternal(input.engine_id);
      return { engine_id: input.engine_id, unregistered: true as const };
    },
  }),
  restart_replica: defineCommand({
    ...admin,
    name: 'restart_replica',
    summary: 'Stop and relaunch one replica (a sleeping model relaunches it when it onloads)',
    method: 'POST',
    path: '/roles/:role/engines/restart',
    params: Role,
    input: Engine,
    output: z.object({ engine_id: z.string(), restarted: z.boolean(), deferred: z.string().optional() }),
    audit: engineSubject,
    handler: async (plane, { params, input }) => {
      const r = await plane.managerOf(params.role).restartReplica(input.engine_id);
      return {
        engine_id: input.engine_id,
        restarted: r.restarted,
        ...(r.restarted
          ? {}
          : { deferred: 'the model is asleep: the replica relaunches when the model onloads' }),
      };
    },
  }),
  list_replicas: defineCommand({
    ...servingRead,
    name: 'list_replicas',
    summary: "A model's replicas with URL, state, version, TP/PP and each rank's node and GPU id",
    method: 'GET',
    path: '/roles/:role/models/:model/replicas',
    params: RoleModel,
    input: None,
    output: ModelReplicasSchema,
    handler: (plane, { params }) => modelReplicas(plane, params.role, params.model),
  }),
  get_replica: defineCommand({
    ...servingRead,
    name: 'get_replica',
    summary: 'One replica by engine id: URL, state, weight version, ranks and GPUs',
    method: 'GET',
    path: '/roles/:role/engines/:engine_id',
    params: z.strictObject({ role: z.string().min(1), engine_id: z.string().min(1) }),
    input: None,
    output: ModelReplicaSchema.extend({ role: z.string(), model: z.string() }),
    handler: (plane, { params }) => {
      const models = plane.managerOf(params.role).snapshot().models;
      for (const [model, m] of Object.entries(models))
        if (m.replicas.some((r) => r.engine_id === params.engine_id)) {
          const replica = modelReplicas(plane, params.role, model).replicas.find(
            (r) => r.engine_id === params.engine_id,
          );
          if (replica) return { ...replica, role: params.role, model };
        }
      throw new UisError({
        code: 'unknown_engine',
        path: 'engine_id',
        message: `role ${params.role} has no replica ${JSON.stringify(params.engine_id)}`,
      });
    },
  }),
};
