import { parseConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_OPTIONS } from '../proxy/index.ts';
import { serverLimitsOf } from './run-server.ts';

const base = { cluster: { nodes: [{ name: 'node-0', gpus: 2 }] }, roles: {} };

describe('the gateway block as server options', () => {
  it('hands gateway.retry to the server as its retry options', () => {
    const limits = serverLimitsOf(
      parseConfig({
        ...base,
        gateway: {
          retry: {
            max_retries: 4,
            initial_backoff_ms: 25,
            max_backoff_ms: 400,
            backoff_multiplier: 3,
            jitter: 0.1,
          },
        },
      }),
    );
    expect(limits.retry).toEqual({
      maxRetries: 4,
      initialBackoffMs: 25,
      maxBackoffMs: 400,
      backoffMultiplier: 3,
      jitter: 0.1,
    });
  });

  it("the schema's retry defaults are the proxy's", () => {
    expect(serverLimitsOf(parseConfig({ ...base, gateway: {} })).retry).toEqual(DEFAULT_RETRY_OPTIONS);
  });
});
