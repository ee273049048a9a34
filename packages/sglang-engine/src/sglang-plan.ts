import { configuredRoles, type PlacementPlan, type PlanViolation, type UisConfig } from '@uis/spec';
import { plannedServerFlags } from './server-args.ts';
import { flagIssues } from './sglang-flags.ts';
import { DEFAULT_SGLANG_VERSION } from './sglang-surface.ts';

/** Every launch flag of every planned replica checked against its model's SGLang release, as violations of the
 * layout (`uis plan` and `uis serve` report them before anything starts). The path names the model's
 * `sglang_version`; each message names the flag, the release and the config field it comes from. */
export function sglangPlanIssues(config: UisConfig, plan: PlacementPlan): PlanViolation[] {
  const issues: PlanViolation[] = [];
  const seen = new Set<string>();
  for (const { role, spec } of configuredRoles(config)) {
    spec.models.forEach((model, i) => {
      const versionPath = `roles.${role}.models[${i}].sglang_version`;
      const version = model.sglang_version ?? DEFAULT_SGLANG_VERSION;
      for (const p of plan.placements.filter((x) => x.role === role && x.model === model.name)) {
        const group = model.engine_groups[p.group];
        if (group === undefined) continue;
        for (const replica of p.replicas) {
          const planned = plannedServerFlags(model, group, replica, {
            host: '127.0.0.1',
            port: 30000,
            offload: spec.deployment.offload,
            distInitAddr: '127.0.0.1:1',
            bootstrapPort: 8998,
          });
          for (const { flags } of planned) {
            for (const issue of flagIssues(flags, version, versionPath)) {
              const key = `${versionPath} ${issue.message}`;
              if (seen.has(key)) continue;
              seen.add(key);
              issues.push({ code: issue.code, path: versionPath, message: issue.message });
            }
          }
        }
      }
    });
  }
  return issues;
}
