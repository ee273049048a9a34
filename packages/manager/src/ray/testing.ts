import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { canConnect } from './ray-head.ts';

/** Why Ray tests cannot run here, or undefined when `ray` is importable and its CLI exists. */
export function rayUnavailable(): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import ray, sys; sys.stdout.write(ray.__version__)'], { stdio: 'pipe' });
  } catch {
    return 'python3 cannot import ray (install requirements-ci.txt)';
  }
  try {
    execFileSync('ray', ['--version'], { stdio: 'pipe' });
  } catch {
    return 'the ray CLI is not on PATH';
  }
  return undefined;
}

/** A Ray cluster of `nodes` logical nodes on this machine (`ray start --block`, each in its own process group so
 * stopping it kills exactly what it started and nothing of any other Ray on the host). */
export class LocalRayCluster {
  private readonly procs: ChildProcess[] = [];
  /** Made in `start()`: a skipped suite still constructs the cluster and must leave nothing in /tmp. */
  tempDir = '';
  address = '';

  constructor(
    private readonly nodes: number,
    private readonly gpusPerNode: number,
    private readonly cpusPerNode = 4,
  ) {}

  async start(timeoutMs = 120_000): Promise<void> {
    // Ray's socket paths must stay short: a short directory under /tmp.
    this.tempDir = mkdtempSync(join(tmpdir(), 'uray-'));
    const [gcs, ...nodePorts] = await freePorts(1 + this.nodes * 2);
    this.address = `127.0.0.1:${gcs}`;
    const common = [
      '--block',
      '--disable-usage-stats',
      `--num-gpus=${this.gpusPerNode}`,
      `--num-cpus=${this.cpusPerNode}`,
    ];
    this.spawn([
      'start',
      '--head',
      `--port=${gcs}`,
      '--include-dashboard=false',
      `--temp-dir=${this.tempDir}`,
      `--node-manager-port=${nodePorts[0]}`,
      `--object-manager-port=${nodePorts[1]}`,
      ...common,
    ]);
    await this.waitNodes(1, timeoutMs);
    for (let i = 1; i < this.nodes; i++) {
      this.spawn([
        'start',
        `--address=${this.address}`,
        `--node-manager-port=${nodePorts[2 * i]}`,
        `--object-manager-port=${nodePorts[2 * i + 1]}`,
        ...common,
      ]);
    }
    await this.waitNodes(this.nodes, timeoutMs);
  }

  private spawn(args: string[]): void {
    const log = openSync(join(this.tempDir, `ray-start-${this.procs.length}.log`), 'a');
    const p = spawn('ray', args, {
      detached: true,
      stdio: ['ignore', log, log],
      env: { ...process.env, RAY_USAGE_STATS_ENABLED: '0' },
    });
    this.procs.push(p);
  }

  /** Polls the GCS until `n` nodes are alive. */
  private async waitNodes(n: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    // A driver started before the GCS listens can hang for a minute: wait for the port first.
    const [host, port] = this.address.split(':') as [string, string];
    const neverListened = () =>
      new Error(
        `Ray GCS ${this.address} never listened: ${readFileSync(join(this.tempDir, 'ray-start-0.log'), 'utf8').slice(-2000)}`,
      );
    await waitFor(
      async () => {
        if (this.procs[0]?.exitCode != null) throw neverListened();
        return canConnect(host, Number(port));
      },
      timeoutMs,
      `Ray GCS ${this.address} listening`,
    ).catch(() => {
      throw neverListened();
    });
    const script = `import ray,sys\nray.init(address="${this.address}",logging_level="ERROR",log_to_driver=False)\nsys.stdout.write(str(sum(1 for x in ray.nodes() if x["Alive"])))`;
    let last = '';
    const alive = () => {
      try {
        last = execFileSync('python3', ['-c', script], {
          stdio: ['ignore', 'pipe', 'pipe'],
          timeout: 60_000,
        }).toString();
      } catch (e) {
        last = String(e);
      }
      return Number(last) >= n;
    };
    await waitFor(alive, Math.max(0, deadline - Date.now()), `${n} Ray nodes alive`).catch(() => {
      throw new Error(`Ray cluster did not reach ${n} nodes in ${timeoutMs} ms (last: ${last.slice(-300)})`);
    });
  }

  /** Runs a Python snippet as a separate Ray driver in the cluster's namespace (a "controller" or an outside
   * observer), returning its stdout. */
  python(code: string, namespace = 'uis'): string {
    const script = `import ray, json, sys\nray.init(address="${this.address}", namespace="${namespace}", logging_level="ERROR", log_to_driver=False)\n${code}`;
    return execFileSync('python3', ['-c', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    }).toString();
  }

  /** PGs and actors as Ray's GCS reports them (an observer independent of the bridge under test). */
  state(namespace = 'uis'): {
    pgs: Array<{ name: string; state: string }>;
    actors: Array<{ name: string; state: string }>;
  } {
    const out = this.python(
      `from ray.util.placement_group import placement_group_table\n` +
        `pgs=[{"name":v.get("name",""),"state":v.get("state","")} for v in placement_group_table().values()]\n` +
        `acts=[{"name":a.get("Name",""),"state":a.get("State","")} for a in ray._private.state.actors().values()]\n` +
        `sys.stdout.write(json.dumps({"pgs":pgs,"actors":acts}))`,
      namespace,
    );
    return JSON.parse(out.slice(out.indexOf('{')));
  }

  async stop(): Promise<void> {
    // Workers first, then the head; SIGTERM makes `ray start --block` take its processes down with it.
    for (const p of [...this.procs].reverse()) {
      if (p.pid === undefined) continue;
      try {
        process.kill(-p.pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
    }
    // Given 10 s to go on their own; whatever is left is killed below.
    await waitFor(
      () => this.procs.every((p) => p.exitCode !== null || p.signalCode !== null),
      10_000,
      'the Ray processes exiting',
    ).catch(() => undefined);
    for (const p of this.procs) {
      if (p.pid === undefined) continue;
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    // Anything Ray daemonised under our temp dir (raylet, GCS, workers) is found by its session path.
    // Never with an empty pattern (a cluster that was never started has no temp dir): it would match everything.
    if (this.tempDir.length > 0) {
      try {
        execFileSync('pkill', ['-KILL', '-f', this.tempDir], { stdio: 'ignore' });
      } catch {
        /* nothing left */
      }
    }
    if (this.tempDir) rmSync(this.tempDir, { recursive: true, force: true });
  }
}
