import { type ConfigRoleInput, parseConfig, type Role, type UisConfig, UisError } from '@uis/spec';
import { tokenize } from './argparse.ts';
import { RELAX_FLAGS } from './flags.ts';
import { genrmRole } from './genrm.ts';
import { readMode } from './mode.ts';
import { FlagReader } from './reader.ts';
import { rolloutRole } from './rollout.ts';
import { teacherRole } from './teacher.ts';
import { checkActorPool, inventoryOf, scheduleOf, trainingOf } from './training.ts';

/** Relax command-line flags -> the same config the YAML file produces. Pure: files named by flags
 * (`--sglang-config`) are passed in `files` by the caller, which does the I/O. Relax's own preflight on argparse
 * values is mirrored here for the rules that concern flags; layout rules (offload where GPUs are shared, Ray
 * reservations, node boundaries) are left to the planner so both inputs get the same violations and codes. */

export { type FlagKind, type FlagTable, type FlagValue, tokenize } from './argparse.ts';
export { RELAX_FLAGS } from './flags.ts';

export interface RelaxArgsOptions {
  /** path -> file content for flags whose value is a file path (`--sglang-config`). */
  files?: Record<string, string>;
  /** Ignore flags this adapter does not know (training flags of a full Relax command line). */
  allowUnknown?: boolean;
}

/** Converts a Relax argv (without the program name) into the config type of `loadConfig`. Throws a 400 UisError
 * (`invalid_relax_args`) listing every problem with the flag it concerns. */
export function fromRelaxArgs(argv: readonly string[], options: RelaxArgsOptions = {}): UisConfig {
  const { values, issues } = tokenize(argv, RELAX_FLAGS, { allowUnknown: options.allowUnknown ?? false });
  const flags = new FlagReader(values, issues);
  const mode = readMode(flags);
  const roles: Partial<Record<Role, ConfigRoleInput>> = {};
  const rollout = rolloutRole(flags, mode, options.files ?? {});
  if (rollout) roles.rollout = rollout;
  const genrm = genrmRole(flags, mode);
  if (genrm) roles.genrm = genrm;
  const teacher = teacherRole(flags, mode);
  if (teacher) roles.teacher = teacher;
  const training = trainingOf(flags, mode);
  checkActorPool(flags, mode, training);
  if (flags.issues.length > 0) {
    throw new UisError({
      code: 'invalid_relax_args',
      path: flags.issues[0]?.path,
      message: flags.issues.map((i) => `${i.path}: ${i.message}`).join('; '),
      details: flags.issues,
    });
  }
  return parseConfig(
    { cluster: inventoryOf(mode, training, roles), training, roles, schedule: scheduleOf(mode, roles) },
    'relax args',
  );
}
