import { describe, expect, it } from 'vitest';
import { RoleSchema } from './model.ts';
import {
  BatchKindSchema,
  capabilitiesOf,
  PRODUCER_ROLE,
  ROLE_CAPABILITIES,
  SCORER_ROLES,
  scorerOf,
  scoresDeferred,
} from './roles.ts';

describe('the role capability table', () => {
  it('gives every batch kind exactly one scorer, and every scorer one kind', () => {
    for (const kind of BatchKindSchema.options) {
      expect(RoleSchema.options.filter((r) => ROLE_CAPABILITIES[r].scores === kind)).toEqual([
        scorerOf(kind),
      ]);
    }
    expect(SCORER_ROLES.map((r) => ROLE_CAPABILITIES[r].scores)).toEqual(BatchKindSchema.options);
    expect({ genrm_score: scorerOf('genrm_score'), teacher_logprobs: scorerOf('teacher_logprobs') }).toEqual({
      genrm_score: 'genrm',
      teacher_logprobs: 'teacher',
    });
  });

  it('has one sample producer, which scores nothing and cannot be deferred behind itself', () => {
    expect(RoleSchema.options.filter((r) => ROLE_CAPABILITIES[r].producesSamples)).toEqual([PRODUCER_ROLE]);
    expect(ROLE_CAPABILITIES[PRODUCER_ROLE].scores).toBeNull();
  });

  it('answers for phase residents that are not roles (the trainer) as scoring nothing', () => {
    expect(scoresDeferred('genrm')).toBe(true);
    expect(scoresDeferred('rollout')).toBe(false);
    expect(scoresDeferred('train')).toBe(false);
    expect(capabilitiesOf('critic')).toBeUndefined();
    expect(capabilitiesOf('genrm')?.messageAdapter).toBe('genrm_messages');
  });

  it('keeps Ray GPU fractions within one GPU per bundle', () => {
    for (const r of RoleSchema.options) {
      const c = ROLE_CAPABILITIES[r];
      expect(c.rayGpuFraction > 0 && c.rayGpuFraction <= 1).toBe(true);
      expect(c.rayGpuFractionBesideProducer <= c.rayGpuFraction).toBe(true);
    }
  });
});
