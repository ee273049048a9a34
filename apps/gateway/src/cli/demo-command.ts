import { configuredRoles, PRODUCER_ROLE, type UisConfig, UisError } from '@uis/spec';
import type { Command } from 'commander';
import { DEMO_CONFIG } from '../package-paths.ts';
import {
  addRunOptions,
  checkDbPath,
  parseHost,
  parsePort,
  readConfig,
  withLayoutExit,
} from './serve-command.ts';

/** Modelled engine timings: slow enough that requests and phases are visible, light enough for 2 cores. */
const SIM_TIMING = {
  simPrefillUsPerToken: 20,
  simDecodeUsPerToken: 4000,
  simStartupMs: 300,
  simOnloadMs: 400,
  simOffloadMs: 250,
};

/** Models with a memory section move their bytes at the sim's H200 speeds: the fixed onload and offload times of
 * unsized engines would only add to them. */
function timingOf(config: UisConfig): Partial<typeof SIM_TIMING> {
  const sized = configuredRoles(config).every(({ spec }) => spec.models.every((m) => m.memory !== undefined));
  const { simOnloadMs: _on, simOffloadMs: _off, ...rest } = SIM_TIMING;
  return sized ? rest : SIM_TIMING;
}

function simFlags(timing: Partial<typeof SIM_TIMING>): string[] {
  return Object.entries(timing).flatMap(([k, v]) => [
    `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
    String(v),
  ]);
}

/** `uis demo`: the README's main command. */
export function registerDemoCommand(program: Command): void {
  const demo = program
    .command('demo')
    .description(
      'run a simulated 2-node x 8-GPU RL cluster (rollout, GenRM, teacher in a colocated defer schedule) with a built-in RL loop and the console',
    )
    .option('--port <port>', 'listen port', parsePort, 8080)
    .option('--host <host>', 'listen address', parseHost, '127.0.0.1')
    .option('--config <file>', 'another layout to run instead of examples/demo.yaml')
    .option('--processes', 'one sglang-sim process per engine node instead of engines inside this process')
    .option('--no-driver', 'do not run the built-in RL loop')
    .option(
      '--db <file>',
      'SQLite file for events, operations, leases and batches: the demo survives a restart (default: in memory)',
    )
    .option(
      '--adopt-engines',
      'with --processes and --db: engines outlive a uis that dies, and the next start adopts them (gateway.adopt_engines)',
    );
  addRunOptions(demo).action(
    async (o: {
      port: number;
      host: string;
      config?: string;
      processes?: boolean;
      driver: boolean;
      db?: string;
      adoptEngines?: boolean;
      logLevel?: string;
      startDeadline?: number;
    }) => {
      const config = readConfig(o.config ?? DEMO_CONFIG);
      if (o.db !== undefined) checkDbPath(o.db, '--db');
      if (o.adoptEngines && (!o.processes || o.db === undefined))
        throw new UisError({
          code: 'invalid_argument',
          path: '--adopt-engines',
          message:
            'needs --processes (engine processes that can outlive uis) and --db FILE (where they are recorded)',
        });
      // Loaded here, not at the top: `uis plan` and `uis --version` should not pay for the server's modules.
      const [{ SimLauncher }, { RlLoopDriver }, { InProcessSimLauncher }, { runServer }] = await Promise.all([
        import('@uis/manager'),
        import('../demo/rl-loop-driver.ts'),
        import('@uis/control-plane'),
        import('./run-server.ts'),
      ]);
      const timing = timingOf(config);
      const inProcess = o.processes ? null : new InProcessSimLauncher(timing);
      const policy = config.roles.rollout?.models[0];
      await withLayoutExit(() =>
        runServer({
          config,
          title: 'uis demo',
          launcher:
            inProcess ?? new SimLauncher({ simArgs: simFlags(timing), keepEngines: o.adoptEngines === true }),
          ...(o.adoptEngines ? { adoptEngines: true } : {}),
          port: o.port,
          host: o.host,
          ...(o.db === undefined ? {} : { dbPath: o.db }),
          managerOptions: { healthIntervalMs: 2000, drainDeadlineMs: 30_000 },
          ...(o.logLevel === undefined ? {} : { logLevel: o.logLevel }),
          ...(o.startDeadline === undefined ? {} : { startDeadlineMs: o.startDeadline }),
          ...(inProcess ? { cleanup: () => inProcess.closeAll() } : {}),
          ...(o.driver && policy && config.schedule.activation_groups[0]
            ? {
                extra: ({ url, adminToken, logger }) => {
                  const group = config.schedule.activation_groups[0];
                  const routing = config.roles.rollout?.routing;
                  const alias = Object.keys(routing?.aliases ?? {})[0];
                  const routeKey = Object.keys(routing?.route_keys ?? {})[0];
                  const driver = new RlLoopDriver({
                    baseUrl: url,
                    adminToken,
                    group: group?.name ?? 'actor',
                    rolloutPhase:
                      group?.phases.find((p) => p.residents.includes(PRODUCER_ROLE))?.name ?? PRODUCER_ROLE,
                    trainPhase: group?.phases.find((p) => p.residents.includes('train'))?.name ?? 'train',
                    ...(alias === undefined ? {} : { chatModel: alias }),
                    ...(routeKey === undefined ? {} : { generateRouteKey: routeKey }),
                    policyModel: policy.name,
                    policyPath: policy.model_path,
                    ...(policy.weight_source === 'tensor'
                      ? { policySource: 'tensor', policyTp: policy.engine_groups[0]?.gpus_per_engine ?? 1 }
                      : {}),
                    logger: logger.child({ component: 'driver' }),
                  });
                  driver.start();
                  return driver;
                },
              }
            : {}),
        }),
      );
    },
  );
}
