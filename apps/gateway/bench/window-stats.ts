import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

/** GC kinds as node reports them (`detail.kind`): a long minor GC and a major one have different causes. */
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
type GcFigures = {
  count: number;
  totalMs: number;
  maxMs: number;
  byKind: Record<string, { count: number; maxMs: number }>;
};
const noGc = (): GcFigures => ({ count: 0, totalMs: 0, maxMs: 0, byKind: {} });

/**
 * What a bench gateway process reports about itself over a measured window (from `reset()` to `read()`): CPU,
 * page faults and context switches, GC pauses (a long one stalls every stream at once) and event-loop delay.
 * Both bench gateways (`gateway-server.ts`, `uis-gateway-server.ts`) serve it at `/_bench/stats`.
 */
export class WindowStats {
  #cpuAtReset = process.cpuUsage();
  #usageAtReset = process.resourceUsage();
  #gc = noGc();
  readonly #loopDelay = monitorEventLoopDelay({ resolution: 5 });
  /** Client connections accepted since start (steady keep-alive load opens none after its ramp). */
  #accepted = 0;

  constructor() {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        this.#gc.count++;
        this.#gc.totalMs += e.duration;
        this.#gc.maxMs = Math.max(this.#gc.maxMs, e.duration);
        const kind = GC_KINDS[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
        this.#gc.byKind[kind] ??= { count: 0, maxMs: 0 };
        const k = this.#gc.byKind[kind];
        k.count++;
        k.maxMs = Math.max(k.maxMs, e.duration);
      }
    }).observe({ entryTypes: ['gc'] });
    this.#loopDelay.enable();
  }

  /** Starts a window; answers the process's CPU so far and the monotonic clock in microseconds (the clock of a V8
   * CPU profile's timestamps: the bench leaves the profile's startup out by it). */
  reset(): { cpuUserUs: number; cpuSystemUs: number; monoUs: number } {
    const cpu = process.cpuUsage();
    this.#loopDelay.reset();
    this.#gc = noGc();
    this.#cpuAtReset = cpu;
    this.#usageAtReset = process.resourceUsage();
    return { cpuUserUs: cpu.user, cpuSystemUs: cpu.system, monoUs: Number(process.hrtime.bigint() / 1000n) };
  }

  /** The window so far. */
  read(): Record<string, unknown> {
    const cpu = process.cpuUsage();
    const u = process.resourceUsage();
    const at = this.#usageAtReset;
    return {
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      accepted: this.#accepted,
      gc: this.#gc,
      windowCpuUs: process.cpuUsage(this.#cpuAtReset),
      windowUsage: {
        minorFaults: u.minorPageFault - at.minorPageFault,
        voluntarySwitches: u.voluntaryContextSwitches - at.voluntaryContextSwitches,
        involuntarySwitches: u.involuntaryContextSwitches - at.involuntaryContextSwitches,
      },
      loopDelayMs: {
        p50: this.#loopDelay.percentile(50) / 1e6,
        p99: this.#loopDelay.percentile(99) / 1e6,
        max: this.#loopDelay.max / 1e6,
      },
    };
  }

  /** Listens on 127.0.0.1:`port` (0: ephemeral), counts accepted connections, and prints `{"port": N}` once
   * listening: the line the bench waits for. */
  listen(server: Server, port: number): void {
    server.on('connection', () => {
      this.#accepted++;
    });
    server.listen(port, '127.0.0.1', () => {
      process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
    });
  }
}
