import { z } from 'zod';

/**
 * The one table of error codes: every `code` the product puts in an error (a thrown UisError, a wire answer, an
 * issue listed in an error's details) and the HTTP status it answers with. A code's status never depends on where
 * it is thrown; a new code is added here first (`error-codes.test.ts` fails on a code the source uses that is not
 * in this table). Modelled on tRPC's closed `TRPC_ERROR_CODE_KEY` union and its `getHTTPStatusCode` table.
 *
 * Sections: what the caller sent (4xx), what the service's state refuses (409), a service or engine that cannot
 * serve now (5xx), then issue codes, which only appear inside the `details` of a 400 (placement violations, config
 * and flag problems, zod and commander issues): their status is that of the error that carries them.
 */
export const ERROR_CODES = {
  // ---- the request itself is wrong (400) --------------------------------------------------------------------
  invalid_input: 400,
  invalid_body: 400,
  invalid_query: 400,
  invalid_json: 400,
  /** A JSON body nests deeper than the gateway's limit (`gateway.max_json_depth`); the path is where. */
  json_too_deep: 400,
  invalid_http: 400,
  invalid_path: 400,
  invalid_url: 400,
  invalid_samples: 400,
  invalid_weight_update: 400,
  invalid_replicas: 400,
  /** A scale-in would remove a replica the plan started with (Relax's initial-engine protection); `force` allows it. */
  scale_in_protected: 400,
  invalid_schedule: 400,
  /** A submitted batch names one sample id twice (the request is wrong on its own; see `sample_exists`). */
  duplicate_sample: 400,
  model_required: 400,
  /** A root OpenAI route (`/v1/...`) got a model name that several roles serve: the details name the candidates. */
  ambiguous_model: 400,
  group_required: 400,
  unknown_route_key: 400,
  /** A serving request on a role's routes names a model the role does not serve (the RFC's routing order and
   * Relax's resolvers answer 400; `unknown_model` stays the 404 of a name in an admin path or field, and of the
   * root OpenAI routes, as OpenAI answers). */
  model_not_served: 400,
  unknown_group: 400,
  unknown_pool: 400,
  usage: 400,
  // `uis` CLI: a file flag or a listen address that cannot be used.
  not_a_file: 400,
  unreadable_file: 400,
  port_in_use: 400,
  port_forbidden: 400,
  host_unavailable: 400,
  listen_failed: 400,
  // ---- a configuration, layout or option that cannot work (400) -------------------------------------------
  invalid_config: 400,
  config_parse_error: 400,
  invalid_layout: 400,
  invalid_relax_args: 400,
  invalid_db_path: 400,
  /** Adoption mode (`gateway.adopt_engines`) with a launcher whose engines cannot outlive the control plane
   * (external, ray, in-process), or without a database file to keep the engines' record in. */
  adoption_unsupported: 400,
  invalid_direct_client_options: 400,
  invalid_engine_options: 400,
  invalid_engine_urls: 400,
  invalid_node_rank: 400,
  invalid_placement: 400,
  env_conflicts_with_placement: 400,
  external_url_missing: 400,
  missing_dist_init_addr: 400,
  placeholder_not_launchable: 400,
  router_arg_reserved: 400,
  router_missing: 400,
  /** The config asks a static model to register for DCS (see `static_model` for a refused runtime request). */
  static_model_dcs: 400,
  /** A launch flag the model's SGLang version does not have, or cannot take as given (arity, type, choices): the
   * message names the flag and the version; refused before any engine starts. */
  sglang_flag_unsupported: 400,
  /** An `sglang_version` uis has no surface for (packages/sglang-engine/surfaces). */
  unsupported_sglang_version: 400,
  /** A launch spec with nothing to run (an empty argv); a process that could not start is `launch_failed`. */
  invalid_launch_spec: 400,
  // Ray bridge (the Python driver's own codes for a request it refuses).
  bad_params: 400,
  unknown_method: 400,
  invalid_bundles: 400,
  // ---- a well-formed body whose content cannot be processed (422) --------------------------------------------
  /** A GenRM request's `messages` or `sampling_params` is not a conversation Relax's GenRM takes: Relax's FastAPI
   * model refuses it with 422, and so does the gateway. */
  invalid_genrm_messages: 422,
  // ---- who may call (401) ------------------------------------------------------------------------------
  unauthorized: 401,
  // ---- who may call: refused before any token is looked at -------------------------------------------------
  /** The Host header names neither the listen address nor a configured name (`gateway.allowed_hosts`): a DNS
   * rebinding page, or a name the operator did not list. */
  host_not_allowed: 403,
  /** Too many failed authentications from this client: wait `Retry-After` seconds. */
  auth_rate_limited: 429,
  // ---- what the caller named does not exist (404) ------------------------------------------------------------
  // A name in a path segment or a body field is the same miss: 404, as OpenAI answers an unknown `model`.
  not_found: 404,
  unknown_role: 404,
  unknown_model: 404,
  unknown_engine: 404,
  /** No scale operation has this request id. */
  unknown_scale_request: 404,
  unknown_phase: 404,
  unknown_activation_group: 404,
  no_activation_groups: 404,
  batch_not_found: 404,
  /** abort_request named a rid the gateway holds no request for: it never came through this gateway, or it ended
   * (its answer went to its caller) before the abort. */
  unknown_rid: 404,
  pg_not_found: 404,
  // ---- HTTP transport (405, 408, 413, 415, 431) ------------------------------------------------------------
  method_not_allowed: 405,
  request_timeout: 408,
  body_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  // ---- the service's state refuses the request (409) --------------------------------------------------------
  /** The model's weight_source is static: it refuses a weight update or a DCS registration asked at runtime. */
  static_model: 409,
  /** The engine's SGLang version cannot do the operation (e.g. release memory by tag before tags existed). */
  sglang_feature_unsupported: 409,
  /** The batch already holds a sample with this id (a conflict with what is stored; see `duplicate_sample`). */
  sample_exists: 409,
  illegal_transition: 409,
  batch_exists: 409,
  batch_empty: 409,
  batch_final: 409,
  batch_incomplete: 409,
  batch_not_open: 409,
  batch_not_runnable: 409,
  batch_not_running: 409,
  batch_state_changed: 409,
  batch_already_committed: 409,
  bundle_missing: 409,
  bundle_probe_rejected: 409,
  engine_not_on_one_node: 409,
  lease_blocked: 409,
  lease_not_blocked: 409,
  manager_not_started: 409,
  manager_shut_down: 409,
  memory_not_released: 409,
  model_held: 409,
  no_regular_group: 409,
  no_reserved_bundles: 409,
  no_resident_replica: 409,
  not_elastic: 409,
  not_external: 409,
  operation_id_conflict: 409,
  operation_interrupted: 409,
  pg_exists: 409,
  pg_not_manager_owned: 409,
  pg_not_owned: 409,
  pg_too_small: 409,
  phase_not_resident: 409,
  /** Another live `uis` holds the database file (one writer per database): the message names its pid, host, port. */
  database_in_use: 409,
  transition_in_progress: 409,
  /** A weight switch of the model runs; an idempotency key queues the next one behind it instead. */
  weight_switch_in_progress: 409,
  /** Another scale operation or weight switch of the model is running (one at a time); the message names it. */
  model_operation_in_progress: 409,
  /** The scale operation has ended or is a scale-in: only a running scale-out can be cancelled. */
  scale_not_cancellable: 409,
  // ---- the caller went away (499, the de-facto "client closed request") --------------------------------------
  client_gone: 499,
  engine_aborted: 499,
  // ---- our own failure (500) -------------------------------------------------------------------------------
  internal_error: 500,
  batch_failed: 500,
  launch_failed: 500,
  ray_head_failed: 500,
  ray_bridge_spawn_failed: 500,
  /** Relays the status of the failure it wraps (see RELAYED_STATUS_CODES). */
  start_failed: 500,
  /** Relays the status of the failure it replays (see RELAYED_STATUS_CODES). */
  operation_failed: 500,
  /** Relays the status of the failure that blocked the lease (see RELAYED_STATUS_CODES). */
  transition_failed: 500,
  // ---- an engine, router or Ray answered badly (502) ---------------------------------------------------------
  engine_bad_answer: 502,
  engine_bad_response: 502,
  engine_http_error: 502,
  engine_error: 502,
  engine_rejected: 502,
  engine_refused: 502,
  engine_response_incomplete: 502,
  engine_stream_error: 502,
  engine_unreachable: 502,
  gateway_fallback_failed: 502,
  activate_failed: 502,
  batch_sample_failed: 502,
  invalid_result: 502,
  scale_failed: 502,
  weight_update_failed: 502,
  weight_version_mismatch: 502,
  router_start_failed: 502,
  ray_bridge_protocol: 502,
  ray_bridge_exited: 502,
  // Ray bridge (the Python driver's codes for a Ray call that failed).
  ray_error: 502,
  ray_connect_failed: 502,
  process_start_failed: 502,
  bad_json: 502,
  // ---- nothing can serve this now; retry later (503) ----------------------------------------------------------
  service_stopping: 503,
  model_not_ready: 503,
  no_eligible_replica: 503,
  no_replica_at_version: 503,
  no_replica: 503,
  no_target: 503,
  no_scorer_replica: 503,
  replica_not_admitting: 503,
  routing_inconsistent: 503,
  discovery_malformed: 503,
  discovery_not_loaded: 503,
  discovery_unavailable: 503,
  engine_missing: 503,
  engine_start_failed: 503,
  /** Another replica's start failed or the engine is being stopped: this start gave up at once. */
  engine_start_cancelled: 503,
  /** Request bodies still arriving hold the gateway's whole body budget (`gateway.body_budget_bytes`). */
  body_budget_exhausted: 503,
  /** A role's admission limit and its queue are full, or the wait for a slot timed out. */
  admission_rejected: 503,
  engine_unavailable: 503,
  ray_not_started: 503,
  router_not_started: 503,
  ray_bridge_closed: 503,
  /** The database file (its path in the message) cannot be written: a read-only file system, lost permissions, an
   * I/O error. Writes resume by themselves once it can be written again. */
  storage_unwritable: 503,
  // ---- the disk is full (507) --------------------------------------------------------------------------------
  /** The disk holding the database is full: nothing new is accepted until space returns; accepted work is kept
   * and writes resume by themselves. */
  storage_full: 507,
  // ---- a deadline passed (504) -------------------------------------------------------------------------------
  engine_timeout: 504,
  barrier_timeout: 504,
  transition_timeout: 504,
  router_not_applied: 504,
  router_start_timeout: 504,
  ray_timeout: 504,
  ray_connect_timeout: 504,
  pg_not_ready: 504,
  // ---- tRPC's own codes, lowercased (its transport refusals before our handlers run) -----------------------
  parse_error: 400,
  bad_request: 400,
  payment_required: 402,
  forbidden: 403,
  method_not_supported: 405,
  timeout: 408,
  conflict: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  unprocessable_content: 422,
  precondition_required: 428,
  too_many_requests: 429,
  client_closed_request: 499,
  internal_server_error: 500,
  not_implemented: 501,
  bad_gateway: 502,
  service_unavailable: 503,
  gateway_timeout: 504,
  // ---- issue codes: placement violations (planner) --------------------------------------------------------
  activation_group_pool: 400,
  activation_mismatch: 400,
  binding_missing: 400,
  binding_out_of_range: 400,
  capacity_exceeded: 400,
  decode_without_prefill: 400,
  defer_not_scheduled: 400,
  defer_phase_order: 400,
  defer_requires_sync: 400,
  defer_role_not_allowed: 400,
  dp_attention_indivisible: 400,
  duplicate_activation_group: 400,
  duplicate_binding: 400,
  duplicate_bundle: 400,
  duplicate_node: 400,
  duplicate_phase: 400,
  empty_engine: 400,
  engine_straddles_nodes: 400,
  fully_async_colocate: 400,
  gpu_bound_twice: 400,
  gpu_out_of_range: 400,
  gpus_not_contiguous: 400,
  gpus_not_divisible: 400,
  mixed_regular_pd: 400,
  multinode_not_whole_nodes: 400,
  multinode_partial_node: 400,
  multinode_repeated_node: 400,
  multinode_shape_changed: 400,
  no_actor_pool: 400,
  offload_required: 400,
  pg_owner_invalid: 400,
  phase_residents_not_disjoint: 400,
  pool_capacity_exceeded: 400,
  prefill_without_decode: 400,
  ray_gpu_oversubscribed: 400,
  scheduled_role_not_colocated: 400,
  shared_coresident_rejected: 400,
  split_overlap: 400,
  /** The residents of a phase need more memory on a GPU than it has (the message gives the bytes per tag). */
  memory_exceeded: 400,
  /** A node names a GPU type that `cluster.gpu_types` does not define. */
  unknown_gpu_type: 400,
  tp_pp_mismatch: 400,
  unknown_node: 400,
  unknown_resident: 400,
  // ---- issue codes: config fields and server args ------------------------------------------------------------
  unknown_field: 400,
  invalid_server_arg: 400,
  server_arg_conflicts_with_placement: 400,
  // ---- issue codes: Relax flags (the legacy adapter) ------------------------------------------------------
  /** A prefix that argparse's allow_abbrev would find ambiguous; the message names every candidate. */
  ambiguous_flag: 400,
  /** A prefix of a known flag where flags we do not know (training flags, SGLang fields) may share it. */
  abbreviated_flag: 400,
  /** A switch given a value (argparse: "ignored explicit argument"). */
  unexpected_value: 400,
  /** An --advantage-estimator / --loss-type Relax does not register. */
  unsupported_algorithm: 400,
  contradictory_flags: 400,
  duplicate_flag: 400,
  invalid_flag: 400,
  invalid_yaml: 400,
  missing_file: 400,
  missing_flag: 400,
  missing_value: 400,
  unexpected_argument: 400,
  unknown_flag: 400,
  // ---- issue codes: zod issues (`issueCode`: `too_small` -> `invalid_too_small`) --------------------------
  invalid_type: 400,
  invalid_too_big: 400,
  invalid_too_small: 400,
  invalid_format: 400,
  invalid_not_multiple_of: 400,
  invalid_unrecognized_keys: 400,
  invalid_union: 400,
  invalid_key: 400,
  invalid_element: 400,
  invalid_value: 400,
  invalid_custom: 400,
  // ---- issue codes: commander's parse errors, in our spelling (`commander.unknownOption` -> `unknown_option`)
  conflicting_option: 400,
  error: 400,
  excess_arguments: 400,
  execute_sub_command_async: 400,
  invalid_argument: 400,
  missing_argument: 400,
  missing_mandatory_option_value: 400,
  option_missing_argument: 400,
  unknown_command: 400,
  unknown_option: 400,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Codes that stand for another party's failure and answer with its status when it is given (an engine's or a
 * gateway's 4xx means the request's content was refused and is passed on; a wrapped or replayed failure keeps the
 * status of the error it wraps). Without one, the table's status holds. */
export const RELAYED_STATUS_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'engine_http_error',
  'engine_error',
  'engine_rejected',
  'gateway_fallback_failed',
  'start_failed',
  'operation_failed',
  'transition_failed',
]);

/** A code on the wire, checked against the table (plan violations the console reads, for one). */
export const ErrorCodeSchema = z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]);

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code);
}

/** The HTTP status of `code`; for a relayed code, `relayed` (a status 400..599) when given. */
export function statusOf(code: ErrorCode, relayed?: number): number {
  if (relayed !== undefined && relayed >= 400 && relayed < 600 && RELAYED_STATUS_CODES.has(code))
    return relayed;
  return ERROR_CODES[code];
}
