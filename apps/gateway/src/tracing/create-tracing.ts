import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { TracingConfig } from '@uis/spec';
import type { UisTracing } from './tracing.ts';

/** The gateway's tracing when `gateway.tracing` is configured, else undefined. The OpenTelemetry modules (about a
 * sixth of a profiled gateway start when they loaded with the server) are imported only then. */
export async function createTracing(
  config: TracingConfig | undefined,
  exporter?: SpanExporter,
): Promise<UisTracing | undefined> {
  if (config === undefined) return undefined;
  const { UisTracing } = await import('./tracing.ts');
  return new UisTracing(config, exporter);
}
