import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  featuresForVersion,
  README_TABLE_MARKERS,
  renderVersionTable,
  sglangFeatures,
} from './sglang-features.ts';
import { compareSGLangVersions, SGLANG_VERSIONS, surfaceOf } from './sglang-surface.ts';

describe('what each SGLang release can do, read from its surface', () => {
  it('the README release table is the generator output (run pnpm sglang:table after a surface changes)', () => {
    const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
    const [start, end] = README_TABLE_MARKERS;
    const section = readme.slice(readme.indexOf(start) + start.length, readme.indexOf(end)).trim();
    expect(section).toBe(renderVersionTable());
  });

  it('tells the releases apart where their source differs', () => {
    const f = (v: string) => sglangFeatures(surfaceOf(v)!);
    // 0.5.2: a pause that takes no body and aborts, no /model_info, no destroy group, no CPU weight backup.
    expect(f('0.5.2')).toMatchObject({
      pauseModes: ['abort'],
      modelInfoPath: '/get_model_info',
      serverInfoPath: '/get_server_info',
      destroyWeightsUpdateGroup: false,
      weightsCpuBackup: false,
      memoryTags: ['kv_cache', 'weights'],
      loadFrom: '/get_load (token total)',
    });
    expect(f('0.5.6.post2')).toMatchObject({
      pauseModes: ['abort', 'retract', 'in_place'],
      modelInfoPath: '/model_info',
      memoryTags: ['cuda_graph', 'kv_cache', 'weights'],
      loadFrom: '/get_load',
      weightVersionFrom: '/get_weight_version',
    });
    // 0.5.9 to 0.5.17 keep /get_weight_version only to answer 404 naming /model_info.
    for (const v of ['0.5.9', '0.5.10.post1', '0.5.12', '0.5.15.post1', '0.5.17']) {
      expect(f(v).weightVersionFrom, v).toBe('model_info');
    }
    // 0.5.23 dropped /get_weight_version and /get_load; it reports weight version spans (new in 0.5.19, after
    // 0.5.17 of this list: AbortReq.weight_versions).
    expect(f('0.5.23')).toMatchObject({
      weightVersionFrom: 'model_info',
      loadFrom: '/v1/loads',
      weightVersionSpans: true,
    });
    for (const v of SGLANG_VERSIONS.filter((x) => x !== '0.5.23'))
      expect(f(v).weightVersionSpans, v).toBe(false);
  });

  it('lists the supported releases oldest first, each with a committed surface of its own version', () => {
    expect([...SGLANG_VERSIONS].sort(compareSGLangVersions)).toEqual(SGLANG_VERSIONS);
    expect(SGLANG_VERSIONS.length).toBeGreaterThanOrEqual(5);
    for (const v of SGLANG_VERSIONS) expect(surfaceOf(v)?.sglang_version).toBe(v);
    const files = readdirSync(join(import.meta.dirname, '..', 'surfaces')).map((f) =>
      f.replace(/\.json$/, ''),
    );
    expect(files.sort(compareSGLangVersions), 'every committed surface is a supported release').toEqual(
      SGLANG_VERSIONS,
    );
  });

  it('reads an engine of a release without a surface as the nearest supported release below it', () => {
    expect(featuresForVersion('0.5.11')).toMatchObject({ version: '0.5.11', modelInfoPath: '/model_info' });
    expect(featuresForVersion('0.5.3').destroyWeightsUpdateGroup).toBe(false); // as 0.5.2
    expect(featuresForVersion('0.6.0').loadFrom).toBe('/v1/loads'); // as the newest
  });
});
