export { type AdminApiOptions, createAdminApi } from './admin/admin-api.ts';
export { authorized, bearerToken } from './gateway/auth.ts';
export {
  GENRM_SAMPLING_DEFAULTS,
  type GenrmMessagesRequest,
  genrmChatBody,
  genrmResponse,
} from './gateway/genrm-adapter.ts';
export {
  InferenceGateway,
  type InferenceGatewayOptions,
  type ServedRequest,
} from './gateway/inference-gateway.ts';
export { type LegacyEngines, legacyEngines } from './gateway/legacy-engines.ts';
export { dashboardQueries, missingMetrics } from './metrics/dashboard-check.ts';
export { GatewayMetrics, type MetricsSources } from './metrics/gateway-metrics.ts';
export { createLogger, UisServer, type UisServerOptions } from './server/uis-server.ts';
export { createTracing } from './tracing/create-tracing.ts';
export type { UisTracing } from './tracing/tracing.ts';
export { consoleState } from './trpc/console-state.ts';
