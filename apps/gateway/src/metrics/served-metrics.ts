import type { Registry } from 'prom-client';

/** One label set's counter: `inc` is one add. */
export interface CounterChild {
  inc(value?: number): void;
}

/** One label set's histogram: `observe` is a bucket search and three adds. */
export interface HistogramChild {
  observe(value: number): void;
}

type Labels = Readonly<Record<string, string>>;
type Value = { value: number; labels: Record<string, string | number>; metricName?: string };

/**
 * Serving counters and histograms whose labelled children are real caches, for the per-request path: a
 * prom-client child hashes, validates and copies its label set on every `inc`/`observe` (about 1 us each, six per
 * request). These keep each child's figures in its own object and hand them to the registry at scrape time, in
 * prom-client's own output format (same lines, same label order), so `/metrics` reads exactly as before.
 */
abstract class ServedMetric<C> {
  readonly aggregator = 'sum';
  protected readonly children = new Map<string, { labels: Labels; child: C }>();

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry,
  ) {
    // The registry only calls get() (and reset()) on a metric: it takes any object with those.
    registry.registerMetric(this as never);
  }

  /** The child of `labels`; the caller keeps it (a lookup here builds the key from the values). */
  labels(labels: Labels): C {
    const key = Object.values(labels).join('\u0000');
    let entry = this.children.get(key);
    if (entry === undefined) {
      entry = { labels: { ...labels }, child: this.make() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  reset(): void {
    this.children.clear();
  }

  protected abstract make(): C;
}

class Count implements CounterChild {
  value = 0;
  /** Like prom-client's, a label set shows once it was counted (an `inc(0)` too), not when its child is made. */
  touched = false;
  inc(value = 1): void {
    // prom-client's rules: a counter only goes up, by a number.
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    if (value < 0) throw new Error('It is not possible to decrease a counter');
    this.value += value;
    this.touched = true;
  }
}

export class ServedCounter extends ServedMetric<Count> {
  readonly type = 'counter';

  protected make(): Count {
    return new Count();
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: Value[] } {
    const values: Value[] = [];
    for (const { labels, child } of this.children.values())
      if (child.touched) values.push({ value: child.value, labels: { ...labels } });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

class Buckets implements HistogramChild {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export class ServedHistogram extends ServedMetric<Buckets> {
  readonly type = 'histogram';

  constructor(
    name: string,
    help: string,
    registry: Registry,
    readonly buckets: readonly number[],
  ) {
    super(name, help, registry);
  }

  protected make(): Buckets {
    return new Buckets(this.buckets);
  }

  /** prom-client's layout: cumulative `_bucket` lines (`le` first), `+Inf`, `_sum`, `_count` per label set. */
  get(): { name: string; help: string; type: string; aggregator: string; values: Value[] } {
    const values: Value[] = [];
    const bucket = `${this.name}_bucket`;
    for (const { labels, child } of this.children.values()) {
      if (child.count === 0) continue; // not observed yet: no lines, as prom-client
      let acc = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        acc += child.counts[i]!;
        values.push({ value: acc, labels: { le: this.buckets[i]!, ...labels }, metricName: bucket });
      }
      values.push({ value: child.count, labels: { le: '+Inf', ...labels }, metricName: bucket });
      values.push({ value: child.sum, labels: { ...labels }, metricName: `${this.name}_sum` });
      values.push({ value: child.count, labels: { ...labels }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
