import { batchCommands } from './batches.ts';
import type { AnyCommand } from './define.ts';
import { eventCommands } from './events.ts';
import { phaseCommands } from './phases.ts';
import { replicaCommands } from './replicas.ts';
import { requestCommands } from './requests.ts';
import { roleCommands } from './roles.ts';
import { scaleCommands } from './scale.ts';
import { weightCommands } from './weights.ts';

/**
 * Every operator command, once, assembled from its group's file. Add a command to its group (and a test beside
 * it): the admin REST route, the tRPC procedure, the CLI subcommand, the audit record, idempotency, the OpenAPI
 * entry and the Python client's method all follow from the entry.
 */
export const COMMAND_TABLE = {
  ...roleCommands,
  ...weightCommands,
  ...requestCommands,
  ...replicaCommands,
  ...scaleCommands,
  ...phaseCommands,
  ...batchCommands,
  ...eventCommands,
};

/** The table's commands in order. */
export const COMMANDS: readonly AnyCommand[] = Object.values(COMMAND_TABLE);
