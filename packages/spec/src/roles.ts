import { z } from 'zod';
import { type Role, RoleSchema } from './model.ts';

/** What a scorer computes for samples the rollout stored instead of calling inline (deferred scoring / OPD). */
export const BatchKindSchema = z.enum(['genrm_score', 'teacher_logprobs']);
export type BatchKind = z.infer<typeof BatchKindSchema>;

/** What a role does, asked by code instead of comparing role names (`scoresDeferred(r)`, never `r === 'genrm'`). */
export interface RoleCapabilities {
  /** Produces the samples other roles score: deferred roles sit in a later phase than its phase, and it cannot be
   * deferred itself. */
  producesSamples: boolean;
  /** The deferred batch kind it scores; null: it scores no deferred batches. */
  scores: BatchKind | null;
  /** How `POST /<role>/generate` reads a body with `messages`: `genrm_messages` is Relax's GenRM call (answered
   * `{"response": ...}`); null: SGLang's raw `/generate`. */
  messageAdapter: 'genrm_messages' | null;
  /** `GET /<role>/engines?schema=1`: Relax Rollout's engines answer (`relax_engines`). */
  legacyDiscovery: 'relax_engines';
  /** `GET /<role>/health?schema=1`: Relax GenRM's `{status: healthy|unhealthy, service}` (`relax_service_status`). */
  legacyHealth: 'relax_service_status';
  /** Ray GPU fraction one of its engine actors holds per bundle (reference/relax.md). */
  rayGpuFraction: number;
  /** The fraction when it shares bundles with the sample producer (GenRM beside rollout holds 0.1). */
  rayGpuFractionBesideProducer: number;
}

export const ROLE_CAPABILITIES = {
  rollout: {
    producesSamples: true,
    scores: null,
    messageAdapter: null,
    legacyDiscovery: 'relax_engines',
    legacyHealth: 'relax_service_status',
    rayGpuFraction: 0.2,
    rayGpuFractionBesideProducer: 0.2,
  },
  genrm: {
    producesSamples: false,
    scores: 'genrm_score',
    messageAdapter: 'genrm_messages',
    legacyDiscovery: 'relax_engines',
    legacyHealth: 'relax_service_status',
    rayGpuFraction: 0.2,
    rayGpuFractionBesideProducer: 0.1,
  },
  teacher: {
    producesSamples: false,
    scores: 'teacher_logprobs',
    messageAdapter: null,
    legacyDiscovery: 'relax_engines',
    legacyHealth: 'relax_service_status',
    rayGpuFraction: 0.2,
    rayGpuFractionBesideProducer: 0.2,
  },
} as const satisfies Record<Role, RoleCapabilities>;

const ROLES = RoleSchema.options;

/** A phase resident (a role, or a pseudo-resident such as the trainer) as a role, if it is one. */
export function asRole(resident: string): Role | undefined {
  return (ROLES as readonly string[]).includes(resident) ? (resident as Role) : undefined;
}

/** The capabilities of a role named by a string (a path segment, a phase resident); undefined: not a role. */
export function capabilitiesOf(name: string): RoleCapabilities | undefined {
  const role = asRole(name);
  return role === undefined ? undefined : ROLE_CAPABILITIES[role];
}

/** Does this resident score deferred batches? */
export function scoresDeferred(resident: string): boolean {
  const role = asRole(resident);
  return role !== undefined && ROLE_CAPABILITIES[role].scores !== null;
}

/** The roles that score deferred batches, in table order. */
export const SCORER_ROLES: readonly Role[] = ROLES.filter((r) => ROLE_CAPABILITIES[r].scores !== null);

/** The role that scores batches of `kind`. */
export function scorerOf(kind: BatchKind): Role {
  const role = ROLES.find((r) => ROLE_CAPABILITIES[r].scores === kind);
  if (role === undefined) throw new Error(`no role scores ${kind}`);
  return role;
}

/** The role whose samples deferred roles score (the one they follow in a defer schedule). */
export const PRODUCER_ROLE: Role = ROLES.find((r) => ROLE_CAPABILITIES[r].producesSamples) ?? 'rollout';
