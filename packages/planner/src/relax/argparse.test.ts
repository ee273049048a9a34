import { describe, expect, it } from 'vitest';
import { type FlagValue, tokenize } from './argparse.ts';
import { RELAX_FLAGS } from './flags.ts';

/** The argparse forms Relax's parser accepts (relax/utils/arguments.py declares --offload-train and
 * --offload-rollout as BooleanOptionalAction, the other switches store_true, allow_abbrev on). */
const read = (argv: string[], allowUnknown = false) => tokenize(argv, RELAX_FLAGS, { allowUnknown });
const values = (argv: string[], allowUnknown = false): Record<string, FlagValue> => {
  const r = read(argv, allowUnknown);
  expect(r.issues).toEqual([]);
  return Object.fromEntries(r.values);
};
const issues = (argv: string[], allowUnknown = false) =>
  read(argv, allowUnknown).issues.map((i) => `${i.code} ${i.path}: ${i.message}`);

describe('Relax argparse rules', () => {
  it.each<[string, string[], Record<string, FlagValue>]>([
    ['BooleanOptionalAction on', ['--offload-train'], { 'offload-train': true }],
    ['BooleanOptionalAction off', ['--no-offload-train'], { 'offload-train': false }],
    [
      'both rollout forms, last wins',
      ['--offload-rollout', '--no-offload-rollout'],
      { 'offload-rollout': false },
    ],
    ['store_true', ['--colocate'], { colocate: true }],
    ['space value', ['--num-gpus-per-node', '4'], { 'num-gpus-per-node': '4' }],
    ['= value', ['--num-gpus-per-node=4'], { 'num-gpus-per-node': '4' }],
    ['= value holding =', ['--resource={"a": "b=c"}'], { resource: '{"a": "b=c"}' }],
    ['negative number is a value', ['--kl-coef', '-0.5'], { 'kl-coef': '-0.5' }],
    [
      'repeated option keeps the last',
      ['--hf-checkpoint', '/a', '--hf-checkpoint', '/b'],
      { 'hf-checkpoint': '/b' },
    ],
    [
      'nargs=+ list',
      ['--inference-defer-roles', 'genrm', 'teacher', '--colocate'],
      { 'inference-defer-roles': ['genrm', 'teacher'], colocate: true },
    ],
    ['unambiguous prefix', ['--rollout-num-gpus-per-eng', '4'], { 'rollout-num-gpus-per-engine': '4' }],
    ['exact spelling wins over longer flags', ['--rollout-num-gpus', '8'], { 'rollout-num-gpus': '8' }],
    ['prefix of a --no- form', ['--no-offload-r'], { 'offload-rollout': false }],
    ['prefix with = value', ['--genrm-num-gpus-per=2'], { 'genrm-num-gpus-per-engine': '2' }],
    ['exact store_true shorter than others', ['--offload'], { offload: true }],
    [
      'SGLang field passes through',
      ['--sglang-mem-fraction-static', '0.8'],
      { 'sglang-mem-fraction-static': '0.8' },
    ],
    [
      'SGLang switch',
      ['--sglang-enable-dp-attention', '--colocate'],
      { 'sglang-enable-dp-attention': true, colocate: true },
    ],
  ])('%s', (_name, argv, expected) => {
    expect(values(argv)).toEqual(expected);
  });

  it.each<[string, string[], boolean, string[]]>([
    [
      'ambiguous prefix names every candidate',
      ['--rollout-num', '4'],
      false,
      [
        'ambiguous_flag --rollout-num: ambiguous option: --rollout-num could match --rollout-num-gpus, --rollout-num-gpus-per-engine; spell the flag out',
      ],
    ],
    [
      'ambiguous --no- prefix',
      ['--no-offload'],
      false,
      [
        'ambiguous_flag --no-offload: ambiguous option: --no-offload could match --no-offload-rollout, --no-offload-train; spell the flag out',
      ],
    ],
    [
      'switch given a value',
      ['--colocate=true'],
      false,
      [
        "unexpected_value --colocate: --colocate: ignored explicit argument 'true'; the switch takes no value",
      ],
    ],
    [
      'BooleanOptionalAction given a value',
      ['--offload-train=false'],
      false,
      [
        "unexpected_value --offload-train: --offload-train: ignored explicit argument 'false'; the switch takes no value (use --no-offload-train to turn it off)",
      ],
    ],
    [
      '--no- of a store_true switch',
      ['--no-colocate'],
      false,
      ['unknown_flag --no-colocate: unknown Relax flag --no-colocate; check the spelling'],
    ],
    [
      'a value after a switch',
      ['--colocate', 'true'],
      false,
      ['unexpected_argument true: unrecognized argument "true"; Relax flags look like --name value'],
    ],
    [
      'underscores are not dashes',
      ['--offload_train'],
      false,
      ['unknown_flag --offload_train: unknown Relax flag --offload_train; check the spelling'],
    ],
    ['missing value', ['--resource'], false, ['missing_value --resource: --resource: expected one argument']],
    [
      'missing list values',
      ['--inference-defer-roles', '--colocate'],
      false,
      ['missing_value --inference-defer-roles: --inference-defer-roles: expected at least one argument'],
    ],
    [
      'a prefix of a known flag among unknown flags',
      ['--rollout-num-gpus-per-eng', '4', '--lr', '1e-6'],
      true,
      [
        'abbreviated_flag --rollout-num-gpus-per-eng: --rollout-num-gpus-per-eng abbreviates --rollout-num-gpus-per-engine, but flags this adapter does not know may share the prefix; spell out --rollout-num-gpus-per-engine',
      ],
    ],
    [
      'a prefix inside the SGLang family',
      ['--sglang-conf', 'x.yaml'],
      false,
      [
        'abbreviated_flag --sglang-conf: --sglang-conf abbreviates --sglang-config, but SGLang fields may share the prefix; spell out --sglang-config',
      ],
    ],
  ])('rejects: %s', (_name, argv, allowUnknown, expected) => {
    expect(issues(argv, allowUnknown)).toEqual(expected);
  });

  it('skips unknown training flags and their values only when asked', () => {
    const argv = ['--lr', '1e-6', '--micro-batch-size', '1', '--use-dynamic-batch-size', '--colocate'];
    expect(values(argv, true)).toEqual({ colocate: true });
    expect(issues(argv).map((i) => i.split(':')[0])).toEqual([
      'unknown_flag --lr',
      'unknown_flag --micro-batch-size',
      'unknown_flag --use-dynamic-batch-size',
    ]);
  });
});
