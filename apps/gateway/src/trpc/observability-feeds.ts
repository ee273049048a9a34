import { pause } from '@uis/control-plane';
import { type Clock, type GpuTimeReport, systemClock, type TimeSeriesUpdate } from '@uis/spec';
import type { GpuTimeTracker } from '../metrics/gpu-time-tracker.ts';
import type { TimeSeriesRing } from '../metrics/time-series-ring.ts';

/** The time series of the last window, then every second the seconds completed since (1 Hz, aligned to the
 * clock's seconds so every subscriber gets the same points). */
export async function* timeSeriesUpdates(
  ring: TimeSeriesRing,
  given: AbortSignal | undefined,
  clock: Clock = systemClock,
): AsyncGenerator<TimeSeriesUpdate> {
  const signal = given ?? new AbortController().signal;
  let update = ring.update(clock.now());
  yield update;
  while (!signal.aborted) {
    await pause(1000 - (clock.now() % 1000) + 5, signal);
    if (signal.aborted) return;
    update = ring.update(clock.now(), update.last_second);
    yield update;
  }
}

/** The GPU-time report, then again after each change (a phase entered), at most every 250 ms. */
export async function* gpuTimeUpdates(
  tracker: GpuTimeTracker,
  given: AbortSignal | undefined,
): AsyncGenerator<GpuTimeReport> {
  const signal = given ?? new AbortController().signal;
  let changed = false;
  let wake: (() => void) | undefined;
  const off = tracker.subscribe(() => {
    changed = true;
    wake?.();
  });
  try {
    yield tracker.report();
    while (!signal.aborted) {
      if (!changed)
        await new Promise<void>((resolve) => {
          wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      wake = undefined;
      if (signal.aborted) return;
      await pause(250, signal);
      changed = false;
      yield tracker.report();
    }
  } finally {
    off();
  }
}
