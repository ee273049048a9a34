"""The typed answers (pydantic) and request bodies (TypedDict) of the admin commands.

Generated from the command table (packages/control-plane/src/commands) through its OpenAPI document by
`pnpm gen:python` (apps/gateway/src/openapi/python-client.ts). Do not edit: change the table and regenerate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue


__all__ = [
    "AbortRequestResult",
    "AbortRequestResultAbortedItem",
    "ActivationWait",
    "ActualGpus",
    "Batch",
    "BatchPage",
    "BatchSample",
    "CancelScaleOpResult",
    "CancelScaleOpResultFailedEnginesItem",
    "EngineRelease",
    "EngineWeightUpdate",
    "Event",
    "GenrmVerdict",
    "GetReplicaResult",
    "GetScaleOpResult",
    "GetScaleOpResultFailedEnginesItem",
    "Intent",
    "Lease",
    "ListBatchesResult",
    "ListEventsResult",
    "ListIntentsResult",
    "ListPhasesResult",
    "ListRolesResult",
    "ListScaleOpsResult",
    "ListScaleOpsResultOperationsItem",
    "ListScaleOpsResultOperationsItemFailedEnginesItem",
    "ManagedModel",
    "ManagedReplica",
    "ManagerSnapshot",
    "ModelActivation",
    "ModelReplica",
    "ModelReplicas",
    "OffloadReport",
    "RegisterExternalResult",
    "ReleaseProof",
    "ReplicaRank",
    "RestartReplicaResult",
    "ScaleInResult",
    "ScaleInResultFailedEnginesItem",
    "ScaleOutResult",
    "ScaleOutResultFailedEnginesItem",
    "SwitchWeightsUpdateDisk",
    "SwitchWeightsUpdateDistributedUpdate",
    "SwitchWeightsUpdateTensor",
    "SwitchWeightsUpdateVersion",
    "TeacherLogprobs",
    "Transition",
    "TransitionStep",
    "UnregisterExternalResult",
    "UpdateWeightsBody",
    "UpdateWeightsBodyDisk",
    "UpdateWeightsBodyDistributedDestroy",
    "UpdateWeightsBodyDistributedInit",
    "UpdateWeightsBodyDistributedUpdate",
    "UpdateWeightsBodyTensor",
    "UpdateWeightsBodyVersion",
    "WeightSwitch",
    "WeightSwitchEngine",
    "WeightSwitchPhasesMs",
    "WeightSwitches",
    "WeightUpdate",
]


class _Model(BaseModel):
    # Unknown fields are kept: a newer service may add fields without breaking an older client.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class EngineRelease(_Model):
    engine_id: str
    memory_released: bool
    state: str


class OffloadReport(_Model):
    memory_released: bool
    engines: list[EngineRelease]


class ActivationWait(_Model):
    group: str
    phase: str | None
    phases: list[str]


class ModelActivation(_Model):
    onloaded: bool
    waits_for: ActivationWait | None = None


class ManagedReplica(_Model):
    engine_id: str
    state: Literal["starting", "ready", "draining", "sleeping", "onloading", "dead"]
    base_url: str | None
    weight_version: str | None
    quarantined: bool
    sglang_version: str | None
    generation: int
    memory_released: bool
    external: bool
    elastic: bool
    failures: int
    pids: list[int]


class ManagedModel(_Model):
    desire: Literal["active", "sleeping"]
    held: bool
    target_weight_version: str | None
    replicas: list[ManagedReplica]


class ManagerSnapshot(_Model):
    role: str
    started: bool
    shutdown: bool
    models: dict[str, ManagedModel]
    created_pgs: list[str]


class ListRolesResult(_Model):
    roles: dict[str, ManagerSnapshot]


class Intent(_Model):
    role: str
    model: str
    intent: Literal["held", "drained"]
    actor: str | None
    operation_id: str | None
    at: float


class ListIntentsResult(_Model):
    intents: list[Intent]


class _UpdateWeightsBodyDiskRequired(TypedDict):
    source: Literal["disk"]
    model_path: str
    weight_version: str


class UpdateWeightsBodyDisk(_UpdateWeightsBodyDiskRequired, total=False):
    load_format: str


class UpdateWeightsBodyVersion(TypedDict):
    source: Literal["version"]
    weight_version: str


class _UpdateWeightsBodyTensorRequired(TypedDict):
    source: Literal["tensor"]
    weight_version: str


class UpdateWeightsBodyTensor(_UpdateWeightsBodyTensorRequired, total=False):
    serialized_named_tensors: Sequence[str]
    per_engine: Mapping[str, Sequence[str]]
    load_format: str
    flush_cache: bool


class _UpdateWeightsBodyDistributedInitRequired(TypedDict):
    source: Literal["distributed"]
    action: Literal["init"]
    master_address: str
    master_port: int
    world_size: int


class UpdateWeightsBodyDistributedInit(_UpdateWeightsBodyDistributedInitRequired, total=False):
    rank_offset: int
    group_name: str
    backend: str


class _UpdateWeightsBodyDistributedUpdateRequired(TypedDict):
    source: Literal["distributed"]
    action: Literal["update"]
    weight_version: str
    names: Sequence[str]
    dtypes: Sequence[str]
    shapes: Sequence[Sequence[int]]


class UpdateWeightsBodyDistributedUpdate(_UpdateWeightsBodyDistributedUpdateRequired, total=False):
    group_name: str
    flush_cache: bool


class _UpdateWeightsBodyDistributedDestroyRequired(TypedDict):
    source: Literal["distributed"]
    action: Literal["destroy"]


class UpdateWeightsBodyDistributedDestroy(_UpdateWeightsBodyDistributedDestroyRequired, total=False):
    group_name: str


UpdateWeightsBody: TypeAlias = (
    UpdateWeightsBodyDisk
    | UpdateWeightsBodyVersion
    | UpdateWeightsBodyTensor
    | UpdateWeightsBodyDistributedInit
    | UpdateWeightsBodyDistributedUpdate
    | UpdateWeightsBodyDistributedDestroy
)


class EngineWeightUpdate(_Model):
    engine_id: str
    ok: bool
    weight_version: str | None
    error: str | None = None


class WeightUpdate(_Model):
    model: str
    weight_version: str | None
    engines: list[EngineWeightUpdate]


class _SwitchWeightsUpdateDiskRequired(TypedDict):
    source: Literal["disk"]
    model_path: str
    weight_version: str


class SwitchWeightsUpdateDisk(_SwitchWeightsUpdateDiskRequired, total=False):
    load_format: str


class SwitchWeightsUpdateVersion(TypedDict):
    source: Literal["version"]
    weight_version: str


class _SwitchWeightsUpdateDistributedUpdateRequired(TypedDict):
    source: Literal["distributed"]
    action: Literal["update"]
    weight_version: str
    names: Sequence[str]
    dtypes: Sequence[str]
    shapes: Sequence[Sequence[int]]


class SwitchWeightsUpdateDistributedUpdate(_SwitchWeightsUpdateDistributedUpdateRequired, total=False):
    group_name: str
    flush_cache: bool


class _SwitchWeightsUpdateTensorRequired(TypedDict):
    source: Literal["tensor"]
    weight_version: str


class SwitchWeightsUpdateTensor(_SwitchWeightsUpdateTensorRequired, total=False):
    serialized_named_tensors: Sequence[str]
    per_engine: Mapping[str, Sequence[str]]
    load_format: str
    flush_cache: bool


class WeightSwitchPhasesMs(_Model):
    stopped: float
    loaded: float
    read_back: float
    committed: float
    continued: float
    published: float


class WeightSwitchEngine(_Model):
    engine_id: str
    ok: bool
    weight_version: str | None
    quarantined: bool
    update_ms: float | None
    error: str | None = None


class WeightSwitch(_Model):
    id: int
    model: str
    mode: Literal["drain", "pause_in_place", "abort"]
    mixed_versions: Literal["forbid", "allow"]
    on_failure: Literal["quarantine", "rollback"]
    from_version: str | None
    to_version: str
    weight_version: str | None
    outcome: Literal["switched", "quarantined", "rolled_back", "failed"]
    started_at: float
    duration_ms: float
    slowest_update_ms: float
    phases_ms: WeightSwitchPhasesMs
    topology_revision: int
    quarantined: list[str]
    engines: list[WeightSwitchEngine]


class WeightSwitches(_Model):
    model: str
    switching: bool
    switches: list[WeightSwitch]


class AbortRequestResultAbortedItem(_Model):
    rid: str
    model: str
    engine_id: str | None


class AbortRequestResult(_Model):
    aborted: list[AbortRequestResultAbortedItem]
    engines: list[str]


class RegisterExternalResult(_Model):
    engine_id: str


class UnregisterExternalResult(_Model):
    engine_id: str
    unregistered: Literal[True]


class RestartReplicaResult(_Model):
    engine_id: str
    restarted: bool
    deferred: str | None = None


class ReplicaRank(_Model):
    rank: int
    node: str
    node_ip: str | None
    node_rank: int
    gpu_id: int


class ActualGpus(_Model):
    node: str
    gpu_ids: list[int]


class ModelReplica(_Model):
    engine_id: str
    replica: int
    group: int
    worker_type: Literal["regular", "prefill", "decode"]
    url: str | None
    state: Literal["starting", "ready", "draining", "sleeping", "onloading", "dead"]
    weight_version: str | None
    tp: int
    pp: int
    gpus_per_engine: int
    ranks: list[ReplicaRank]
    actual_gpus: list[ActualGpus] | None


class ModelReplicas(_Model):
    role: str
    model: str
    weight_version: str | None
    replicas: list[ModelReplica]


class GetReplicaResult(_Model):
    engine_id: str
    replica: int
    group: int
    worker_type: Literal["regular", "prefill", "decode"]
    url: str | None
    state: Literal["starting", "ready", "draining", "sleeping", "onloading", "dead"]
    weight_version: str | None
    tp: int
    pp: int
    gpus_per_engine: int
    ranks: list[ReplicaRank]
    actual_gpus: list[ActualGpus] | None
    role: str
    model: str


class ScaleOutResultFailedEnginesItem(_Model):
    engine_id: str
    error: str


class ScaleOutResult(_Model):
    request_id: str
    kind: Literal["scale_out", "scale_in"]
    role: str
    model_name: str
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"]
    num_replicas: int
    engine_urls: list[str]
    engine_ids: list[str]
    failed_engines: list[ScaleOutResultFailedEnginesItem]
    force: bool
    dry_run: bool
    timeout_secs: float | None
    partial_success_policy: Literal["rollback_all", "keep_partial"] | None = None
    actor: str
    created_at: float
    updated_at: float
    error_message: str | None
    weight_version: str | None
    message: str


class ScaleInResultFailedEnginesItem(_Model):
    engine_id: str
    error: str


class ScaleInResult(_Model):
    request_id: str
    kind: Literal["scale_out", "scale_in"]
    role: str
    model_name: str
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"]
    num_replicas: int
    engine_urls: list[str]
    engine_ids: list[str]
    failed_engines: list[ScaleInResultFailedEnginesItem]
    force: bool
    dry_run: bool
    timeout_secs: float | None
    partial_success_policy: Literal["rollback_all", "keep_partial"] | None = None
    actor: str
    created_at: float
    updated_at: float
    error_message: str | None
    weight_version: str | None
    message: str


class ListScaleOpsResultOperationsItemFailedEnginesItem(_Model):
    engine_id: str
    error: str


class ListScaleOpsResultOperationsItem(_Model):
    request_id: str
    kind: Literal["scale_out", "scale_in"]
    role: str
    model_name: str
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"]
    num_replicas: int
    engine_urls: list[str]
    engine_ids: list[str]
    failed_engines: list[ListScaleOpsResultOperationsItemFailedEnginesItem]
    force: bool
    dry_run: bool
    timeout_secs: float | None
    partial_success_policy: Literal["rollback_all", "keep_partial"] | None = None
    actor: str
    created_at: float
    updated_at: float
    error_message: str | None
    weight_version: str | None
    message: str


class ListScaleOpsResult(_Model):
    operations: list[ListScaleOpsResultOperationsItem]


class GetScaleOpResultFailedEnginesItem(_Model):
    engine_id: str
    error: str


class GetScaleOpResult(_Model):
    request_id: str
    kind: Literal["scale_out", "scale_in"]
    role: str
    model_name: str
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"]
    num_replicas: int
    engine_urls: list[str]
    engine_ids: list[str]
    failed_engines: list[GetScaleOpResultFailedEnginesItem]
    force: bool
    dry_run: bool
    timeout_secs: float | None
    partial_success_policy: Literal["rollback_all", "keep_partial"] | None = None
    actor: str
    created_at: float
    updated_at: float
    error_message: str | None
    weight_version: str | None
    message: str


class CancelScaleOpResultFailedEnginesItem(_Model):
    engine_id: str
    error: str


class CancelScaleOpResult(_Model):
    request_id: str
    kind: Literal["scale_out", "scale_in"]
    role: str
    model_name: str
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"]
    num_replicas: int
    engine_urls: list[str]
    engine_ids: list[str]
    failed_engines: list[CancelScaleOpResultFailedEnginesItem]
    force: bool
    dry_run: bool
    timeout_secs: float | None
    partial_success_policy: Literal["rollback_all", "keep_partial"] | None = None
    actor: str
    created_at: float
    updated_at: float
    error_message: str | None
    weight_version: str | None
    message: str


class ReleaseProof(_Model):
    phase: str | None
    roles: list[str]
    engines: list[EngineRelease]
    at: float


class Lease(_Model):
    group: str
    phase: str | None
    holder: list[str]
    status: Literal["held", "transitioning", "blocked"]
    reason: str | None
    target: str | None
    last_release: ReleaseProof | None
    since: float


class ListPhasesResult(_Model):
    leases: list[Lease]


class TransitionStep(_Model):
    step: str
    phase: str
    duration_ms: float


class Transition(_Model):
    group: str
    from_: str | None = Field(alias="from")
    to: str
    path: list[str]
    duration_ms: float
    steps: list[TransitionStep]


class Batch(_Model):
    id: str
    kind: Literal["genrm_score", "teacher_logprobs"]
    role: str
    model: str | None
    state: Literal["open", "sealed", "running", "committed", "failed"]
    reason: str | None
    attempts: int
    samples: int
    results: int
    created_at: float
    updated_at: float
    started_at: float | None
    committed_at: float | None


class ListBatchesResult(_Model):
    batches: list[Batch]


class GenrmVerdict(_Model):
    response: str
    score: float


class TeacherLogprobs(_Model):
    logprobs: list[float | None]
    token_ids: list[int]


class BatchSample(_Model):
    sample_id: str
    output: GenrmVerdict | TeacherLogprobs | None


class BatchPage(_Model):
    batch: Batch
    samples: list[BatchSample] | None = None
    next_after: str | None


class Event(_Model):
    seq: int
    at: float
    kind: str
    subject: str
    actor: str | None
    operation_id: str | None
    duration_ms: float | None
    data: dict[str, JsonValue]


class ListEventsResult(_Model):
    events: list[Event]
