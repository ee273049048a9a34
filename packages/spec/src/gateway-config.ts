import { z } from 'zod';
import { EngineAddressSchema, HOST_PATTERN } from './discovery.ts';

/** `host:port` of a Ray GCS (IPv6 in brackets), or `auto` (the cluster this machine belongs to). */
const RAY_ADDRESS = new RegExp(`^(?:auto|${HOST_PATTERN}:(\\d{1,5}))$`);

/** The Ray head `uis serve` starts for the run when `gateway.ray.address` is absent. */
export const RayHeadConfigSchema = z
  .object({
    /** Logical GPUs the head offers (default: the GPUs Ray detects). */
    num_gpus: z.number().int().nonnegative().optional(),
    /** CPUs the head offers (default: the CPUs Ray detects). */
    num_cpus: z.number().int().positive().optional(),
  })
  .strict();
export type RayHeadConfig = z.infer<typeof RayHeadConfigSchema>;

/** The `gateway.ray` block: where the Ray cluster is and how engines are started on it (`launcher: ray`). */
export const RayGatewayConfigSchema = z
  .object({
    /** GCS address of an existing cluster (`10.0.0.5:6379`, or `auto`). Absent: `uis serve` starts a local head
     * for the run and stops it on exit. */
    address: z
      .string()
      .refine((a) => {
        const m = RAY_ADDRESS.exec(a);
        return m !== null && (m[1] === undefined || (Number(m[1]) > 0 && Number(m[1]) <= 65535));
      }, 'must be host:port of the Ray GCS (e.g. 10.0.0.5:6379) or auto')
      .optional(),
    /** Ray namespace of the named placement groups and actors (external and controller PGs are looked up in it). */
    namespace: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'must be a Ray namespace: letters, digits, "_", "." or "-"')
      .default('uis'),
    /** Python with `ray` installed: runs the Ray bridge (and the local head). */
    python: z.string().min(1, 'must name a Python executable, e.g. python3').default('python3'),
    /** Engine command: real SGLang (`python -m sglang.launch_server`) or the simulator (tests, demos; the
     * simulator's Node entry point must exist at the same path on every Ray node). */
    engine: z.enum(['sglang', 'sim']).default('sglang'),
    /** Replaces the command prefix of `engine` (SGLang's launch flags follow it), e.g. a venv's python. */
    engine_command: z
      .array(z.string().min(1, 'must not be empty'))
      .min(1, 'must hold at least the program to run')
      .optional(),
    /** Extra flags appended to every engine's command line. */
    engine_args: z.array(z.string()).default([]),
    /** Address engines bind. `0.0.0.0` advertises the node IP Ray reports; a one-machine cluster may use
     * `127.0.0.1`. */
    engine_host: z.string().min(1, 'must be an address, e.g. 0.0.0.0').default('0.0.0.0'),
    /** Environment of every engine process. */
    env: z.record(z.string(), z.string()).default({}),
    /** Deadline for connecting to Ray, in seconds. */
    connect_timeout_s: z.number().positive().default(60),
    /** Deadline for a placement group to be placed, in seconds. */
    pg_ready_timeout_s: z.number().positive().default(60),
    /** Resources of the local head; only without `address`. */
    head: RayHeadConfigSchema.optional(),
  })
  .strict()
  .superRefine((ray, ctx) => {
    if (ray.address !== undefined && ray.head !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['head'],
        message:
          'head settings apply only to the head uis serve starts itself; remove head, or remove address to start a local head',
      });
  });
export type RayGatewayConfig = z.infer<typeof RayGatewayConfigSchema>;

/** The `gateway.tracing` block: OpenTelemetry spans over OTLP/HTTP. Absent: no tracing at all (no spans made). */
export const TracingConfigSchema = z
  .object({
    /** Where spans go: an OTLP/HTTP traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`. */
    otlp_endpoint: z.url({
      protocol: /^https?$/,
      message: 'must be an http(s) URL, e.g. http://127.0.0.1:4318/v1/traces',
    }),
    /** `service.name` of the spans. */
    service_name: z.string().min(1).default('uis'),
    /** Share of serving requests traced (phase transitions, batches and weight updates always are). */
    sample_ratio: z.number().min(0).max(1).default(1),
  })
  .strict();
export type TracingConfig = z.infer<typeof TracingConfigSchema>;

const RETRY_DEFAULTS = {
  max_retries: 2,
  initial_backoff_ms: 10,
  max_backoff_ms: 200,
  backoff_multiplier: 2,
  jitter: 0.5,
};

/** The `gateway.retry` block: how a serving request whose engine failed before answering a byte (connection
 * refused, reset or closed; never a timeout, an engine status or a started answer) is sent to another replica. The
 * wait before retry n is `min(max_backoff_ms, initial_backoff_ms * backoff_multiplier^(n-1))`, minus a random
 * share of up to `jitter` of it. */
export const RetryConfigSchema = z
  .object({
    /** Retries after the first attempt, each on a replica the request has not tried (0: none). */
    max_retries: z.number().int().min(0).max(10).default(RETRY_DEFAULTS.max_retries),
    /** Wait before the first retry, in ms. */
    initial_backoff_ms: z.number().int().min(0).max(60_000).default(RETRY_DEFAULTS.initial_backoff_ms),
    /** Longest wait before any retry, in ms. */
    max_backoff_ms: z.number().int().min(0).max(60_000).default(RETRY_DEFAULTS.max_backoff_ms),
    /** Growth of the wait from one retry to the next. */
    backoff_multiplier: z.number().min(1).max(10).default(RETRY_DEFAULTS.backoff_multiplier),
    /** Share of each wait taken off at random (0: exact waits; 0.5: between half and the whole). */
    jitter: z.number().min(0).max(1).default(RETRY_DEFAULTS.jitter),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.max_backoff_ms < r.initial_backoff_ms)
      ctx.addIssue({
        code: 'custom',
        path: ['max_backoff_ms'],
        message: `must be at least initial_backoff_ms (${r.initial_backoff_ms})`,
      });
  });
export type RetryConfig = z.infer<typeof RetryConfigSchema>;

/** The `gateway` block of the config file: where `uis serve` listens and who may call it. Tokens may also come
 * from the environment (`UIS_ADMIN_TOKEN`, `UIS_SERVING_TOKEN`) so a config file in git holds no secret. */
/** How `uis serve` starts engines: simulated, local processes, engines started elsewhere, or Ray actors. */
export const LauncherKindSchema = z.enum(['sim', 'local', 'external', 'ray']);
export type LauncherKind = z.infer<typeof LauncherKindSchema>;

/** `gateway.front` when the config does not say (the gateway's own default too). */
export const GATEWAY_FRONT_DEFAULT: 'fast' | 'node' = 'fast';

export const GatewayConfigSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(8080),
    /** Bearer token of the admin API and the console's actions. */
    admin_token: z.string().min(8).optional(),
    /** When set, discovery and serving also need `Authorization: Bearer <token>` (the RFC's open question 3:
     * external discovery is authenticated with a bearer token; the admin token is accepted too). */
    serving_token: z.string().min(8).optional(),
    /** A bearer token for Relax's elastic paths only (`/<role>/scale_out`, `/<role>/scale_in`, their lists, status
     * and cancels): what a Relax autoscaler or a K8s lifecycle hook is given instead of the admin token. It opens
     * no other admin command. Without it those paths take the admin token (never none). */
    scale_token: z.string().min(8).optional(),
    /** `open`: Relax's elastic paths take no credential at all, as Relax's own server serves them (its autoscaler
     * and K8s hooks send none), so they drive uis unchanged. Only for a gateway only the job can reach; every other
     * admin command still needs its token, and uis warns at start. Default `token`. */
    scale_auth: z.enum(['token', 'open']).default('token'),
    /** Request body limit of the serving routes, in bytes. */
    max_body_bytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    /** Time a client has to send a whole request (headers and body), in ms; a slower one gets 408 and its
     * connection closed. Answers may take as long as they take (hour-long streams are not cut). */
    body_timeout_ms: z.number().int().positive().default(60_000),
    /** Bytes all request bodies still arriving may hold at once, process-wide; beyond it new bodies get 503 with
     * `Retry-After`. Bounds memory under many slow or stalled uploads. */
    body_budget_bytes: z
      .number()
      .int()
      .positive()
      .default(512 * 1024 * 1024),
    /** Deepest JSON nesting any route accepts (400 `json_too_deep` with the path beyond). */
    max_json_depth: z.number().int().min(2).max(10_000).default(128),
    /** Host header values accepted besides the listen address and loopback names (e.g. `uis.example.org` or
     * `uis.example.org:8080`); any other Host is refused 403, which stops DNS-rebinding pages. `*` accepts any. */
    allowed_hosts: z.array(z.string().min(1)).default([]),
    /** Credential-like request headers (Cookie, X-Api-Key, Api-Key) are dropped before a request reaches an
     * engine; a header named here passes through (e.g. `X-Api-Key` for engines behind their own key check).
     * `Authorization` carries our own tokens and never passes (engines get `engine_api_key`), nor do hop-by-hop
     * headers. */
    pass_headers: z
      .array(
        z
          .string()
          .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name')
          .refine(
            (h) =>
              !/^(authorization|proxy-.*|connection|keep-alive|te|trailer|transfer-encoding|upgrade)$/i.test(
                h,
              ),
            {
              message:
                'carries our own tokens or is hop-by-hop and never reaches an engine (engines get engine_api_key)',
            },
          ),
      )
      .default([]),
    /** Each role's admission limit: requests forwarded at once, how many more may wait for a slot and for how
     * long; beyond, 503 `admission_rejected` + Retry-After. */
    admission: z
      .object({
        limit: z.number().int().positive().default(1024),
        queue: z.number().int().nonnegative().default(1024),
        queue_timeout_ms: z.number().int().positive().default(10_000),
      })
      .strict()
      .default({ limit: 1024, queue: 1024, queue_timeout_ms: 10_000 }),
    /** Retries of serving requests whose engine failed before answering (see RetryConfigSchema). */
    retry: RetryConfigSchema.default(RETRY_DEFAULTS),
    /** SQLite file for events, operations, leases and deferred batches (`:memory:` keeps nothing). */
    db_path: z.string().min(1).default(':memory:'),
    /** Adoption mode, for real GPUs where loading weights takes minutes: engines run without a watchdog, so they
     * outlive a control plane that dies (kill -9, OOM, crash), and the next start on the same database adopts the
     * recorded engines that still run and match (pid, port, model, probed over HTTP) instead of launching a second
     * set; records it cannot identify are stopped. Launchers `sim` and `local`; needs `db_path` (or `--db`). A
     * clean stop (Ctrl-C, SIGTERM) still stops every engine. Off: engines die with the control plane. */
    adopt_engines: z.boolean().default(false),
    /** Engine launcher of `uis serve`. */
    launcher: LauncherKindSchema.default('sim'),
    /** `external`: engine id -> URL (or `host:port`) of an engine started elsewhere. */
    external_urls: z.record(z.string(), EngineAddressSchema).default({}),
    /** `ray`: the cluster and the engine command (all defaults when absent: a local head, real SGLang). */
    ray: RayGatewayConfigSchema.optional(),
    /** One log line per serving request: role, model, replica, status, latency, tokens, request id. */
    access_log: z.boolean().default(false),
    /** What parses client requests: `fast` serves the serving routes (generate, chat, completions) on raw sockets
     * with a strict parser of its own and hands every other request, and any it does not fully understand, to
     * node:http; `node`: node:http parses every request. */
    front: z.enum(['fast', 'node']).default(GATEWAY_FRONT_DEFAULT),
    /** OpenTelemetry tracing; off when absent. */
    tracing: TracingConfigSchema.optional(),
  })
  .strict();
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;
