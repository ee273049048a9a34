/** The Grafana dashboard shipped with the gateway (apps/gateway/grafana/uis-dashboard.json) must only query metrics
 * the gateway exports: these helpers read the metric names out of its panel queries and out of a `/metrics` text.
 * No imports, so the e2e suite can run the same check against the live demo. */

const METRIC = /\b(?:uis|nodejs|process)_[a-z0-9_]+\b/g;
const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];

interface Panel {
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
}

/** Every metric name each panel queries, by panel title. */
export function dashboardQueries(dashboard: {
  panels?: Panel[];
}): Array<{ panel: string; metrics: string[] }> {
  const out: Array<{ panel: string; metrics: string[] }> = [];
  const visit = (panels: Panel[] | undefined) => {
    for (const p of panels ?? []) {
      const metrics = [...new Set((p.targets ?? []).flatMap((t) => t.expr?.match(METRIC) ?? []))];
      if (metrics.length > 0) out.push({ panel: p.title ?? '(untitled)', metrics });
      visit(p.panels);
    }
  };
  visit(dashboard.panels);
  return out;
}

/** Metric families a Prometheus text exposition declares (`# TYPE name kind`), with their kinds. */
export function exportedFamilies(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) (\S+)/.exec(line);
    if (m) out.set(m[1] as string, m[2] as string);
  }
  return out;
}

/** `panel: metric` for every queried metric the exposition lacks (a histogram's `_bucket`/`_sum`/`_count` count as
 * its family, a summary's `_sum`/`_count` too). */
export function missingMetrics(dashboard: { panels?: Panel[] }, exposition: string): string[] {
  const families = exportedFamilies(exposition);
  const exists = (name: string) => {
    if (families.has(name)) return true;
    const suffix = HISTOGRAM_SUFFIXES.find((s) => name.endsWith(s));
    if (suffix === undefined) return false;
    const kind = families.get(name.slice(0, -suffix.length));
    return kind === 'histogram' || (kind === 'summary' && suffix !== '_bucket');
  };
  return dashboardQueries(dashboard).flatMap((q) =>
    q.metrics.filter((m) => !exists(m)).map((m) => `${q.panel}: ${m}`),
  );
}
