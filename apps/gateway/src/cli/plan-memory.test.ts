import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type PlanJson, runPlan } from './plan-command.ts';

const examples = join(import.meta.dirname, '..', '..', '..', '..', 'examples');
const files = readdirSync(examples)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

function plan(file: string, ...flags: Array<'--json' | '--compare'>) {
  let out = '';
  let err = '';
  const code = runPlan(
    [join(examples, file)],
    { json: flags.includes('--json'), compare: flags.includes('--compare') },
    {
      cwd: examples,
      readFile: (p) => readFileSync(p, 'utf8'),
      out: (t) => (out += t),
      err: (t) => (err += t),
    },
  );
  return { code, out, err };
}

describe('uis plan --compare', () => {
  it('there are README examples to compare', () => {
    expect(files).toEqual(
      expect.arrayContaining(['demo.yaml', 'defer.yaml', 'split.yaml', 'decoupled.yaml']),
    );
  });

  it.for(files)('runs on examples/%s, in text and JSON', (file) => {
    const bad = file.startsWith('bad-');
    const text = plan(file, '--compare');
    expect(text.code).toBe(bad ? 1 : 0);
    const json = plan(file, '--compare', '--json');
    const doc = JSON.parse(json.out) as PlanJson;
    expect(json.code).toBe(text.code);
    if (bad) return;
    const groups = doc.memory ?? [];
    if (groups.length === 0) expect(text.out).toContain('no activation group: nothing switches');
    for (const g of groups) {
      expect(text.out).toContain(`compare activation group ${g.group}: `);
      expect(text.out).toMatch(
        new RegExp(
          `per step\\s+${g.configured.bubble_s.toFixed(2)} s\\s+per step\\s+${g.optimized.bubble_s.toFixed(2)} s`,
        ),
      );
      expect(g.optimized.bubble_s).toBeLessThanOrEqual(g.configured.bubble_s);
    }
  });

  it('prints per phase the resident weights and per switch the released tags, bytes moved and predicted time', () => {
    const { out } = plan('demo.yaml');
    expect(out).toContain(
      'memory of activation group actor (order configured): predicted switch time 0.23 s per step (1.71 s if every switch released everything)',
    );
    expect(out).toMatch(
      /genrm_score\s+genrm\s+policy, policy-code, judge, math-teacher\s+123\.3 GB of 141\.0 GB/,
    );
    expect(out).toMatch(
      /genrm_score -> teacher_opd\s+judge: kv_cache\s+math-teacher: kv_cache\s+0\.0 GB\s+0\.03 s/,
    );
    expect(out).toMatch(
      /train -> rollout\s+-\s+policy: kv_cache\+sync, policy-code: kv_cache\+sync\s+8\.2 GB\s+0\.17 s/,
    );
  });

  it('plain --json keeps the shape of the plan issue; --compare adds the memory plan', () => {
    expect(Object.keys(JSON.parse(plan('demo.yaml', '--json').out))).not.toContain('memory');
    const doc = JSON.parse(plan('demo.yaml', '--json', '--compare').out) as PlanJson;
    expect(doc.memory?.[0]).toMatchObject({ group: 'actor', order: 'configured', unsized: [] });
    expect(doc.memory?.[0]?.configured.switches.map((s) => s.from)).toEqual([
      'rollout',
      'genrm_score',
      'teacher_opd',
      'train',
    ]);
  });

  it('names the models it cannot size (no memory section: they release everything)', () => {
    expect(plan('defer.yaml').out).toContain(
      'not sized (no memory section; every switch releases all they hold): policy, judge, teacher',
    );
  });
});
