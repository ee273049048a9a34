import { describe, expect, it } from 'vitest';
import { DiscoverySnapshotSchema, RFC_DISCOVERY_EXAMPLE } from './discovery.ts';

const engine = (over: Record<string, unknown>) => ({
  engine_id: 'm/0',
  base_url: 'http://node-1:15000',
  state: 'ready',
  direct_eligible: true,
  ...over,
});
const snapshot = (e: Record<string, unknown>) => ({
  role: 'rollout',
  topology_revision: 1,
  phase: null,
  models: { m: { state: 'ready', router_url: null, engines: [e] } },
});

describe('discovery snapshot schema', () => {
  it('parses the RFC example unchanged', () => {
    expect(DiscoverySnapshotSchema.parse(RFC_DISCOVERY_EXAMPLE)).toEqual(RFC_DISCOVERY_EXAMPLE);
  });

  it.each([
    ['sleeping', { state: 'sleeping' }, 'direct_eligible can only be true for a ready replica'],
    ['no url', { base_url: null }, 'direct_eligible needs a base_url'],
    ['credentials', { base_url: 'http://u:p@h:1' }, 'credentials'],
    ['query', { base_url: 'http://h:1/?x=1' }, 'query'],
    ['fragment', { base_url: 'http://h:1/#f' }, 'fragment'],
    ['scheme', { base_url: 'ftp://h:1' }, 'http or https'],
    ['not a url', { base_url: 'node-1:15000x' }, 'URL'],
  ])('rejects an engine with %s', (_name, over, message) => {
    const result = DiscoverySnapshotSchema.safeParse(snapshot(engine(over)));
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.message).join(' ')).toContain(message);
  });

  it('accepts a sleeping replica that is not eligible', () => {
    expect(
      DiscoverySnapshotSchema.safeParse(snapshot(engine({ state: 'sleeping', direct_eligible: false })))
        .success,
    ).toBe(true);
  });
});
