import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from './config.ts';
import { UisError } from './errors.ts';

const base = { cluster: { nodes: [{ name: 'node-0', gpus: 2 }] }, roles: {} };

function issues(gateway: unknown): Array<{ path: string; message: string }> {
  try {
    parseConfig({ ...base, gateway }, 'uis.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(UisError);
    expect((e as UisError).code).toBe('invalid_config');
    return (e as UisError).details as Array<{ path: string; message: string }>;
  }
  throw new Error('the config was accepted');
}

describe('gateway.launcher: ray and the gateway.ray block', () => {
  it('takes the defaults: a local head, real SGLang, namespace uis', () => {
    const c = parseConfig({ ...base, gateway: { launcher: 'ray', ray: {} } });
    expect(c.gateway?.launcher).toBe('ray');
    expect(c.gateway?.ray).toEqual({
      namespace: 'uis',
      python: 'python3',
      engine: 'sglang',
      engine_args: [],
      engine_host: '0.0.0.0',
      env: {},
      connect_timeout_s: 60,
      pg_ready_timeout_s: 60,
    });
  });

  it('accepts an existing cluster and the simulator from YAML', () => {
    const c = loadConfig(
      [
        'cluster: { nodes: [{ name: node-0, gpus: 2 }] }',
        'roles: {}',
        'gateway:',
        '  launcher: ray',
        '  ray:',
        '    address: ray-head.internal:6379',
        '    engine: sim',
        '    engine_host: 127.0.0.1',
        '    engine_args: [--sim-startup-ms, "10"]',
      ].join('\n'),
    );
    expect(c.gateway?.ray).toMatchObject({
      address: 'ray-head.internal:6379',
      engine: 'sim',
      engine_host: '127.0.0.1',
      engine_args: ['--sim-startup-ms', '10'],
    });
    for (const address of ['auto', '10.0.0.5:6379', '[::1]:6379'])
      expect(parseConfig({ ...base, gateway: { ray: { address } } }).gateway?.ray?.address).toBe(address);
  });

  it('names the path of every bad value', () => {
    const found = issues({
      launcher: 'slurm',
      ray: {
        address: '10.0.0.5',
        namespace: 'no spaces',
        python: '',
        engine: 'vllm',
        engine_command: [],
        engine_host: '',
        env: { A: 1 },
        connect_timeout_s: 0,
        pg_ready_timeout_s: -1,
        head: { num_gpus: -1, num_cpus: 1.5, memory: 3 },
        adress: 'typo:1',
      },
    });
    expect(found.map((i) => i.path).sort()).toEqual([
      'gateway.launcher',
      'gateway.ray.address',
      'gateway.ray.adress',
      'gateway.ray.connect_timeout_s',
      'gateway.ray.engine',
      'gateway.ray.engine_command',
      'gateway.ray.engine_host',
      'gateway.ray.env.A',
      'gateway.ray.head.memory',
      'gateway.ray.head.num_cpus',
      'gateway.ray.head.num_gpus',
      'gateway.ray.namespace',
      'gateway.ray.pg_ready_timeout_s',
      'gateway.ray.python',
    ]);
    const byPath = new Map(found.map((i) => [i.path, i.message]));
    expect(byPath.get('gateway.ray.address')).toBe(
      'must be host:port of the Ray GCS (e.g. 10.0.0.5:6379) or auto',
    );
    expect(byPath.get('gateway.ray.adress')).toMatch(/unknown field "adress"/);
    expect(byPath.get('gateway.ray.head.num_cpus')).toBe('must be a whole number (no fractions)');
  });

  it('refuses a port out of range and head settings next to an address', () => {
    expect(issues({ ray: { address: 'h:0' } }).map((i) => i.path)).toEqual(['gateway.ray.address']);
    expect(issues({ ray: { address: 'h:65536' } }).map((i) => i.path)).toEqual(['gateway.ray.address']);
    const head = issues({ ray: { address: '10.0.0.5:6379', head: { num_gpus: 8 } } });
    expect(head).toEqual([
      expect.objectContaining({ path: 'gateway.ray.head', message: expect.stringMatching(/remove head/) }),
    ]);
  });
});

describe('gateway.retry', () => {
  it('defaults to two retries, 10 ms doubling up to 200 ms with half jitter', () => {
    expect(parseConfig({ ...base, gateway: {} }).gateway?.retry).toEqual({
      max_retries: 2,
      initial_backoff_ms: 10,
      max_backoff_ms: 200,
      backoff_multiplier: 2,
      jitter: 0.5,
    });
    const off = parseConfig({ ...base, gateway: { retry: { max_retries: 0 } } }).gateway?.retry;
    expect(off).toMatchObject({ max_retries: 0, initial_backoff_ms: 10 });
  });

  it('names the path of every bad value, and a cap below the first wait', () => {
    const found = issues({
      retry: { max_retries: -1, jitter: 2, backoff_multiplier: 0.5, initial_backoff_ms: 1.5, retries: 3 },
    });
    expect(found.map((i) => i.path).sort()).toEqual([
      'gateway.retry.backoff_multiplier',
      'gateway.retry.initial_backoff_ms',
      'gateway.retry.jitter',
      'gateway.retry.max_retries',
      'gateway.retry.retries',
    ]);
    expect(issues({ retry: { initial_backoff_ms: 500, max_backoff_ms: 100 } })).toEqual([
      expect.objectContaining({
        path: 'gateway.retry.max_backoff_ms',
        message: 'must be at least initial_backoff_ms (500)',
      }),
    ]);
  });
});

describe('gateway.pass_headers', () => {
  it('names credential headers that reach the engines', () => {
    expect(parseConfig({ ...base, gateway: { pass_headers: ['X-Api-Key'] } }).gateway?.pass_headers).toEqual([
      'X-Api-Key',
    ]);
    expect(parseConfig({ ...base, gateway: {} }).gateway?.pass_headers).toEqual([]);
  });

  it('refuses Authorization (our own tokens), hop-by-hop headers and non-names, with their path', () => {
    const found = issues({ pass_headers: ['Authorization', 'Proxy-Authorization', 'connection', 'x key'] });
    expect(found.map((i) => i.path)).toEqual([
      'gateway.pass_headers[0]',
      'gateway.pass_headers[1]',
      'gateway.pass_headers[2]',
      'gateway.pass_headers[3]',
    ]);
    expect(found[0]?.message).toMatch(/our own tokens/);
    expect(found[3]?.message).toMatch(/HTTP header name/);
  });
});
