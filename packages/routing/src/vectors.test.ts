import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DiscoverySnapshot, UisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { ReplicaSelector } from './replica-selector.ts';
import { requestKeys } from './request-keys.ts';
import { route } from './route.ts';
import { isStale, type StalenessBound, StalenessRule } from './staleness.ts';
import { compareWeightVersions } from './weight-version.ts';

/** The shared routing vectors (`packages/routing/vectors/*.json`, format in its README): the Python client's
 * pytest reads the same files, so both implementations make the same decision on each of them. */
const VECTORS_DIR = join(import.meta.dirname, '..', 'vectors');

interface RouteInput {
  body: unknown;
  headers?: Record<string, string>;
  exclude?: string[];
}

interface Expect {
  model?: string;
  engine_id?: string | null;
  url?: string;
  reason?: string;
  error?: { code: string; status: number; path?: string; retry_after_s?: number };
}

type Step =
  | { snapshot: string }
  | { acquire: string }
  | { release: string }
  | { route: RouteInput; expect: Expect }
  | { route: RouteInput; expect_engines: string[] }
  | { compare: [string, string, number] }
  | { in_flight: { model: string; started_on: Array<string | null> }; expect_stale: boolean[] };

interface VectorFile {
  description: string;
  snapshots: Record<string, unknown>;
  cases: Array<{ name: string; steps: Step[] }>;
}

function decide(snapshot: unknown, selector: ReplicaSelector, input: RouteInput): Expect {
  const keys = requestKeys(input.body, input.headers ?? {});
  const routed = route(snapshot, keys, selector, { exclude: new Set(input.exclude ?? []) });
  if (routed instanceof UisError) {
    const details = routed.details as { retry_after_s?: number } | undefined;
    return {
      error: {
        code: routed.code,
        status: routed.status,
        ...(routed.path === undefined ? {} : { path: routed.path }),
        ...(details?.retry_after_s === undefined ? {} : { retry_after_s: details.retry_after_s }),
      },
    };
  }
  const { selection } = routed;
  return {
    model: selection.model,
    engine_id: selection.engineId,
    url: selection.url,
    reason: selection.reason,
  };
}

/** The fields the vector names, from what was decided (an error compares code and status, plus path and
 * retry_after_s when the vector gives them). */
function subset(actual: Expect, expected: Expect): Expect {
  if (expected.error !== undefined || actual.error !== undefined) {
    if (actual.error === undefined || expected.error === undefined) return actual;
    const picked: Record<string, unknown> = {};
    for (const key of Object.keys(expected.error)) picked[key] = actual.error[key as keyof Expect['error']];
    return { error: picked as Expect['error'] };
  }
  const picked: Record<string, unknown> = {};
  for (const key of Object.keys(expected)) picked[key] = actual[key as keyof Expect];
  return picked as Expect;
}

function runCase(file: VectorFile, steps: Step[]): void {
  const selector = new ReplicaSelector();
  // One rule per case, as the gateway and a DirectClient keep one: it sees every snapshot in order.
  const staleness = new StalenessRule();
  let bounds: StalenessBound[] = [];
  let snapshot: unknown;
  steps.forEach((step, i) => {
    const at = `step ${i}`;
    if ('snapshot' in step) {
      expect(file.snapshots, at).toHaveProperty([step.snapshot]);
      // A fresh object per step, as a new publication is (snapshots are cached by identity).
      snapshot = structuredClone(file.snapshots[step.snapshot]);
      bounds = staleness.bounds(snapshot as DiscoverySnapshot);
    } else if ('in_flight' in step) {
      const bound = bounds.find((b) => b.model === step.in_flight.model);
      const stale = step.in_flight.started_on.map((v) => bound !== undefined && isStale(bound, v));
      expect(stale, at).toEqual(step.expect_stale);
    } else if ('acquire' in step) {
      selector.acquire(step.acquire);
    } else if ('release' in step) {
      selector.release(step.release);
    } else if ('compare' in step) {
      const [a, b, sign] = step.compare;
      expect(Math.sign(compareWeightVersions(a, b)), `${at}: compare ${a} ${b}`).toBe(sign);
    } else if ('expect_engines' in step) {
      const picked = step.expect_engines.map(() => decide(snapshot, selector, step.route).engine_id);
      expect(picked, at).toEqual(step.expect_engines);
    } else {
      const actual = decide(snapshot, selector, step.route);
      expect(subset(actual, step.expect), at).toEqual(step.expect);
    }
  });
}

const files = readdirSync(VECTORS_DIR).filter((f) => f.endsWith('.json'));

describe('shared routing vectors', () => {
  it('exist', () => {
    expect(files.length).toBeGreaterThanOrEqual(2);
  });
  for (const name of files) {
    const file = JSON.parse(readFileSync(join(VECTORS_DIR, name), 'utf8')) as VectorFile;
    describe(name, () => {
      for (const c of file.cases) {
        it(c.name, () => runCase(file, c.steps));
      }
    });
  }
});
