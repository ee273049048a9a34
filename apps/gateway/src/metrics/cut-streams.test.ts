import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from './gateway-metrics.ts';

const none = {
  inFlight: () => [],
  replicaStates: () => [],
  topologyRevisions: () => [],
  batchCounts: () => [],
};

describe('uis_requests_total status', () => {
  it('counts a stream the engine cut after its 200 as status="cut", not as a success', async () => {
    const m = new GatewayMetrics(none, { processMetrics: false });
    const base = { role: 'rollout', model: 'policy', totalMs: 5 };
    m.observeRequest({ ...base, status: 200 });
    m.observeRequest({ ...base, status: 200, upstreamError: 'engine_response_incomplete' });
    m.observeRequest({ ...base, status: 502, upstreamError: 'engine_unreachable' });
    const text = await m.text();
    expect(text).toContain('uis_requests_total{role="rollout",model="policy",status="200"} 1');
    expect(text).toContain('uis_requests_total{role="rollout",model="policy",status="cut"} 1');
    expect(text).toContain('uis_requests_total{role="rollout",model="policy",status="502"} 1');
    expect(text).toContain(
      'uis_upstream_errors_total{role="rollout",model="policy",kind="engine_response_incomplete"} 1',
    );
  });
});
