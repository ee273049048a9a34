import { describe, expect, it } from 'vitest';
import { ArgparseError, parseSimArgs } from './options.ts';

describe('parseSimArgs', () => {
  it('reads SGLang launch flags in both spellings', () => {
    const { options, warnings } = parseSimArgs(
      [
        '--model-path',
        'Qwen/Qwen3-4B',
        '--served-model-name',
        'qwen',
        '--host',
        '0.0.0.0',
        '--port=31000',
        '--tp',
        '2',
        '--pp-size',
        '2',
        '--dp-size',
        '1',
        '--ep-size',
        '1',
        '--base-gpu-id',
        '4',
        '--gpu-id-step',
        '2',
        '--nnodes',
        '2',
        '--node-rank',
        '1',
        '--dist-init-addr',
        '10.0.0.1:5000',
        '--enable-memory-saver',
        '--enable-weights-cpu-backup',
        '--enable-metrics',
        '--max-running-requests',
        '8',
        '--disaggregation-mode',
        'prefill',
        '--disaggregation-bootstrap-port',
        '9000',
        '--skip-server-warmup',
        '--mem-fraction-static',
        '0.8',
      ],
      {},
    );
    expect(warnings).toEqual([]);
    expect(options).toMatchObject({
      modelPath: 'Qwen/Qwen3-4B',
      servedModelName: 'qwen',
      host: '0.0.0.0',
      port: 31000,
      tpSize: 2,
      ppSize: 2,
      baseGpuId: 4,
      gpuIdStep: 2,
      nnodes: 2,
      nodeRank: 1,
      distInitAddr: '10.0.0.1:5000',
      enableMemorySaver: true,
      enableWeightsCpuBackup: true,
      enableMetrics: true,
      maxRunningRequests: 8,
      disaggregationMode: 'prefill',
      disaggregationBootstrapPort: 9000,
      skipServerWarmup: true,
      memFractionStatic: 0.8,
    });
    expect(parseSimArgs(['--tp-size', '4'], {}).options.tpSize).toBe(4);
  });

  it('reads the sim flags and CUDA_VISIBLE_DEVICES', () => {
    const { options } = parseSimArgs(
      [
        '--sim-decode-us-per-token',
        '50',
        '--sim-crash-after',
        '3',
        '--sim-error-rate',
        '0.25',
        '--sim-early-release',
        '--sim-seed',
        '7',
      ],
      { CUDA_VISIBLE_DEVICES: '2,3' },
    );
    expect(options).toMatchObject({
      simDecodeUsPerToken: 50,
      simCrashAfter: 3,
      simErrorRate: 0.25,
      simEarlyRelease: true,
      simSeed: 7,
      cudaVisibleDevices: '2,3',
    });
  });

  it('warns about SGLang flags it does not model and skips their values', () => {
    const { options, warnings } = parseSimArgs(
      ['--attention-backend', 'fa3', '--enable-torch-compile', '--tp', '2'],
      {},
    );
    expect(options.tpSize).toBe(2);
    expect(warnings).toEqual([
      'ignoring --attention-backend (an SGLang flag the simulator does not model)',
      'ignoring --enable-torch-compile (an SGLang flag the simulator does not model)',
    ]);
  });

  it('refuses a flag the simulated release does not have, as its argparse does', () => {
    expect(() => parseSimArgs(['--tp-size', '2', '--no-such-flag', 'x'], {})).toThrow(
      new ArgparseError('launch_server.py: error: unrecognized arguments: --no-such-flag x'),
    );
    // 0.5.2 has no --enable-weights-cpu-backup (0.5.6.post2 has it).
    const old = ['--enable-weights-cpu-backup', '--sim-sglang-version', '0.5.2'];
    expect(() => parseSimArgs(old, {})).toThrow(/unrecognized arguments: --enable-weights-cpu-backup$/);
    expect(
      parseSimArgs(['--enable-weights-cpu-backup', '--sim-sglang-version=0.5.6.post2'], {}).options,
    ).toMatchObject({ enableWeightsCpuBackup: true, simSglangVersion: '0.5.6.post2' });
    expect(() => parseSimArgs(['--disaggregation-mode', 'both'], {})).toThrow(
      /argument --disaggregation-mode: invalid choice: 'both' \(choose from 'null', 'prefill', 'decode'\)/,
    );
    expect(() => parseSimArgs(['--sim-sglang-version', '0.1.0'], {})).toThrow(
      /not a supported SGLang release/,
    );
  });

  it.each([
    [['--tp', 'two']],
    [['--disaggregation-mode', 'both']],
    [['--sim-error-rate', '2']],
    [['--port']],
  ])('rejects %j', (argv) => {
    expect(() => parseSimArgs(argv, {})).toThrow(/--/);
  });
});
