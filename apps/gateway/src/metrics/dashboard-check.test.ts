import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlacementPlan } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { dashboardQueries, missingMetrics } from './dashboard-check.ts';
import { GatewayMetrics } from './gateway-metrics.ts';
import { GpuTimeTracker } from './gpu-time-tracker.ts';

const dashboard = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', '..', 'grafana', 'uis-dashboard.json'), 'utf8'),
) as Parameters<typeof missingMetrics>[0];

describe('the Grafana dashboard', () => {
  it('queries only metrics a gateway registry exports (the e2e suite checks the live demo too)', async () => {
    const metrics = new GatewayMetrics({
      inFlight: () => [],
      replicaStates: () => [],
      topologyRevisions: () => [],
      batchCounts: () => [],
      replicaWeights: () => [],
    });
    const plan: PlacementPlan = { mode: 'colocated_defer', pools: {}, placements: [], activation_groups: [] };
    new GpuTimeTracker({ plan, registry: metrics.registry });
    expect(dashboardQueries(dashboard).length).toBeGreaterThanOrEqual(15);
    expect(missingMetrics(dashboard, await metrics.text())).toEqual([]);
  });

  it('names the panel and metric a dashboard queries but the exposition lacks', () => {
    const text = '# TYPE uis_requests_total counter\n# TYPE uis_request_duration_seconds histogram\n';
    const d = {
      panels: [
        { title: 'ok', targets: [{ expr: 'rate(uis_request_duration_seconds_bucket[1m])' }] },
        { title: 'row', panels: [{ title: 'gone', targets: [{ expr: 'rate(uis_nope_total[1m])' }] }] },
        { title: 'not a histogram', targets: [{ expr: 'uis_requests_total_count' }] },
      ],
    };
    expect(missingMetrics(d, text)).toEqual([
      'gone: uis_nope_total',
      'not a histogram: uis_requests_total_count',
    ]);
  });
});
