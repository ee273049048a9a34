import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '@uis/sglang-engine';
import { type Clock, systemClock, UisError } from '@uis/spec';

export interface RayHeadOptions {
  /** Python with `ray` installed; the head runs as `python -m ray.scripts.scripts start --head --block`. */
  python?: string;
  /** Logical GPUs/CPUs the head offers (default: what Ray detects). */
  numGpus?: number;
  numCpus?: number;
  /** Deadline for the head to accept a driver. Default 120 s. */
  timeoutMs?: number;
  /** The deadline's and the polls' time source. */
  clock?: Clock;
}

/** A single-node Ray cluster started for one run, owned by whoever started it. */
export interface RayHead {
  /** `127.0.0.1:<gcs port>`. */
  address: string;
  /** Ray's temp/session directory of this head (unique to it). */
  tempDir: string;
  /** pid of `ray start --block` (leader of the head's process group). */
  pid: number;
  /** Stops the head and every process of it (idempotent). */
  stop(): Promise<void>;
}

const headError = (message: string, cause?: unknown): UisError =>
  new UisError({
    code: 'ray_head_failed',
    path: 'gateway.ray',
    message,
    ...(cause === undefined ? {} : { cause }),
  });

/** Starts a Ray head on this machine for one run (`uis serve` without `gateway.ray.address`). It runs in its own
 * process group with its own temp directory, so `stop()` takes down exactly its processes and no other Ray on the
 * host. Resolves once a driver can connect and the node is alive. */
export async function startRayHead(opts: RayHeadOptions = {}): Promise<RayHead> {
  const python = opts.python ?? 'python3';
  const timeoutMs = opts.timeoutMs ?? 120_000;
  // Ray's socket paths must stay short: a short directory under /tmp.
  const tempDir = mkdtempSync(join(tmpdir(), 'uis-ray-'));
  const [gcs, nodeManager, objectManager] = (await freePorts(3)) as [number, number, number];
  const address = `127.0.0.1:${gcs}`;
  const logFile = join(tempDir, 'ray-head.log');
  const log = openSync(logFile, 'a');
  const child: ChildProcess = spawn(
    python,
    [
      '-m',
      'ray.scripts.scripts',
      'start',
      '--head',
      '--block',
      '--disable-usage-stats',
      '--include-dashboard=false',
      `--port=${gcs}`,
      `--node-manager-port=${nodeManager}`,
      `--object-manager-port=${objectManager}`,
      `--temp-dir=${tempDir}`,
      ...(opts.numGpus === undefined ? [] : [`--num-gpus=${opts.numGpus}`]),
      ...(opts.numCpus === undefined ? [] : [`--num-cpus=${opts.numCpus}`]),
    ],
    { detached: true, stdio: ['ignore', log, log], env: { ...process.env, RAY_USAGE_STATS_ENABLED: '0' } },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let spawnError: Error | undefined;
  child.once('error', (e) => {
    spawnError = e;
  });
  let stopping: Promise<void> | undefined;
  const head: RayHead = {
    address,
    tempDir,
    pid: child.pid ?? -1,
    stop: () => {
      stopping ??= stopHead(child, exited, tempDir);
      return stopping;
    },
  };
  const logTail = () => {
    try {
      return readFileSync(logFile, 'utf8').slice(-1500);
    } catch {
      return '';
    }
  };
  try {
    const clock = opts.clock ?? systemClock;
    const deadline = clock.now() + timeoutMs;
    const gone = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
    // A driver started before the GCS listens can hang for a minute: wait for the port first.
    while (!(await canConnect('127.0.0.1', gcs))) {
      if (spawnError)
        throw new UisError({
          code: 'ray_head_failed',
          path: 'gateway.ray.python',
          message: `cannot run ${python}: ${spawnError.message}`,
          cause: spawnError,
        });
      if (gone()) throw headError(`the Ray head exited before it listened: ${logTail()}`);
      if (clock.now() > deadline)
        throw headError(`the Ray head did not listen in ${timeoutMs} ms: ${logTail()}`);
      await clock.sleep(300);
    }
    const probe = `import ray,sys\nray.init(address="${address}",logging_level="ERROR",log_to_driver=False)\nsys.stdout.write(str(sum(1 for x in ray.nodes() if x["Alive"])))`;
    for (let last = ''; ; ) {
      last = await run(python, ['-c', probe], Math.max(5_000, deadline - clock.now()));
      if (Number(last) >= 1) break;
      if (gone()) throw headError(`the Ray head exited while starting: ${logTail()}`);
      if (clock.now() > deadline)
        throw headError(`the Ray head had no live node in ${timeoutMs} ms (${last.slice(-300)})`);
      await clock.sleep(1000);
    }
    return head;
  } catch (e) {
    await head.stop();
    throw e;
  }
}

async function stopHead(child: ChildProcess, exited: Promise<void>, tempDir: string): Promise<void> {
  const pgid = child.pid;
  if (pgid !== undefined) {
    // SIGTERM makes `ray start --block` take its GCS, raylet and workers down with it.
    signalGroup(pgid, 'SIGTERM');
    await Promise.race([exited, sleep(10_000)]);
    signalGroup(pgid, 'SIGKILL');
    // Until node has seen it exit, the head is a zombie that still answers kill(pid, 0): wait for it.
    await Promise.race([exited, sleep(5_000)]);
  }
  // Whatever Ray daemonised outside the group is found by this head's own session directory in its command line.
  for (let i = 0; i < 20; i++) {
    const left = pidsMentioning(tempDir);
    if (left.length === 0) break;
    for (const pid of left) {
      try {
        process.kill(pid, i < 5 ? 'SIGTERM' : 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await sleep(250);
  }
  rmSync(tempDir, { recursive: true, force: true });
}

/** pids (other than ours) whose command line, arguments joined by spaces, contains `needle` (Linux /proc; empty
 * elsewhere). */
export function pidsMentioning(needle: string): number[] {
  if (needle.length < 8) return [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const e of entries) {
    const pid = Number(e);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(needle)) out.push(pid);
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* already gone */
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function run(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs }, (err, stdout, stderr) =>
      resolve(err ? `${String(err.message)} ${String(stderr)}` : String(stdout)),
    );
  });
}

/** Whether a TCP connection to host:port opens (the Ray GCS listens). */
export function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
