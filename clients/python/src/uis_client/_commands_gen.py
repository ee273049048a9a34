"""Every admin command as a `Call` and as a method of the sync and async clients.

Generated from the command table (packages/control-plane/src/commands) through its OpenAPI document by
`pnpm gen:python` (apps/gateway/src/openapi/python-client.ts). Do not edit: change the table and regenerate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal, TypeVar

from pydantic import JsonValue

from ._calls import Call, WAIT_MARGIN_S, given, no_result, q, query, result_of
from ._models_gen import (
    AbortRequestResult,
    Batch,
    BatchPage,
    CancelScaleOpResult,
    GetReplicaResult,
    GetScaleOpResult,
    Lease,
    ListBatchesResult,
    ListEventsResult,
    ListIntentsResult,
    ListPhasesResult,
    ListRolesResult,
    ListScaleOpsResult,
    ModelActivation,
    ModelReplicas,
    OffloadReport,
    RegisterExternalResult,
    RestartReplicaResult,
    ScaleInResult,
    ScaleOutResult,
    SwitchWeightsUpdateDisk,
    SwitchWeightsUpdateDistributedUpdate,
    SwitchWeightsUpdateTensor,
    SwitchWeightsUpdateVersion,
    Transition,
    UnregisterExternalResult,
    UpdateWeightsBody,
    WeightSwitch,
    WeightSwitches,
    WeightUpdate,
)


T = TypeVar("T")


def activate_call(
    role: str,
    *,
    tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
) -> Call[None]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/activate",
        no_result,
        body=given(tags=tags),
        mutation=True,
    )


def drain_call(
    role: str,
    *,
    deadline_ms: int | None = None,
    policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
) -> Call[OffloadReport]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/drain",
        result_of(OffloadReport),
        body=given(deadline_ms=deadline_ms, policy=policy),
        mutation=True,
    )


def deactivate_call(role: str) -> Call[OffloadReport]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/deactivate",
        result_of(OffloadReport),
        body={},
        mutation=True,
    )


def activate_model_call(
    role: str,
    model: str,
    *,
    tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
) -> Call[ModelActivation]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/activate",
        result_of(ModelActivation),
        body=given(tags=tags),
        mutation=True,
    )


def drain_model_call(
    role: str,
    model: str,
    *,
    deadline_ms: int | None = None,
    policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
) -> Call[OffloadReport]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/drain",
        result_of(OffloadReport),
        body=given(deadline_ms=deadline_ms, policy=policy),
        mutation=True,
    )


def deactivate_model_call(role: str, model: str) -> Call[OffloadReport]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/deactivate",
        result_of(OffloadReport),
        body={},
        mutation=True,
    )


def list_roles_call() -> Call[ListRolesResult]:
    return Call(
        "GET",
        "/admin/roles",
        result_of(ListRolesResult),
        admin=False,
    )


def list_intents_call() -> Call[ListIntentsResult]:
    return Call(
        "GET",
        "/admin/intents",
        result_of(ListIntentsResult),
        admin=False,
    )


def update_weights_call(role: str, model: str, body: UpdateWeightsBody) -> Call[WeightUpdate]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/weights",
        result_of(WeightUpdate),
        body=dict(body),
        mutation=True,
    )


def switch_weights_call(
    role: str,
    model: str,
    mode: Literal["drain", "pause_in_place", "abort"],
    update: SwitchWeightsUpdateDisk | SwitchWeightsUpdateVersion | SwitchWeightsUpdateDistributedUpdate | SwitchWeightsUpdateTensor,
    *,
    mixed_versions: Literal["forbid", "allow"] = "forbid",
    on_failure: Literal["quarantine", "rollback"] = "quarantine",
    deadline_ms: int | None = None,
) -> Call[WeightSwitch]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/weights/switch",
        result_of(WeightSwitch),
        body={"mode": mode, "update": update, **given(mixed_versions=mixed_versions, on_failure=on_failure, deadline_ms=deadline_ms)},
        mutation=True,
    )


def weight_switches_call(role: str, model: str) -> Call[WeightSwitches]:
    return Call(
        "GET",
        f"/admin/roles/{q(role)}/models/{q(model)}/weights/switches",
        result_of(WeightSwitches),
        admin=False,
    )


def abort_request_call(
    role: str,
    *,
    rid: str | None = None,
    abort_all: bool | None = None,
    model: str | None = None,
) -> Call[AbortRequestResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/abort_request",
        result_of(AbortRequestResult),
        body=given(rid=rid, abort_all=abort_all, model=model),
        mutation=True,
    )


def register_external_call(role: str, model: str, url: str) -> Call[RegisterExternalResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/models/{q(model)}/engines",
        result_of(RegisterExternalResult),
        body={"url": url},
        mutation=True,
    )


def unregister_external_call(role: str, engine_id: str) -> Call[UnregisterExternalResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/engines/unregister",
        result_of(UnregisterExternalResult),
        body={"engine_id": engine_id},
        mutation=True,
    )


def restart_replica_call(role: str, engine_id: str) -> Call[RestartReplicaResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/engines/restart",
        result_of(RestartReplicaResult),
        body={"engine_id": engine_id},
        mutation=True,
    )


def list_replicas_call(role: str, model: str) -> Call[ModelReplicas]:
    return Call(
        "GET",
        f"/admin/roles/{q(role)}/models/{q(model)}/replicas",
        result_of(ModelReplicas),
        admin=False,
    )


def get_replica_call(role: str, engine_id: str) -> Call[GetReplicaResult]:
    return Call(
        "GET",
        f"/admin/roles/{q(role)}/engines/{q(engine_id)}",
        result_of(GetReplicaResult),
        admin=False,
    )


def scale_out_call(
    role: str,
    *,
    model_name: str | None = None,
    num_replicas: int = 0,
    engine_urls: Sequence[str] | None = None,
    timeout_secs: float | None = None,
    partial_success_policy: Literal["rollback_all", "keep_partial"] = "rollback_all",
) -> Call[ScaleOutResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/scale_out",
        result_of(ScaleOutResult),
        body=given(model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, timeout_secs=timeout_secs, partial_success_policy=partial_success_policy),
        mutation=True,
    )


def scale_in_call(
    role: str,
    *,
    model_name: str | None = None,
    num_replicas: int = 0,
    engine_urls: Sequence[str] | None = None,
    force: bool = False,
    dry_run: bool = False,
    timeout_secs: float | None = None,
) -> Call[ScaleInResult]:
    return Call(
        "POST",
        f"/admin/roles/{q(role)}/scale_in",
        result_of(ScaleInResult),
        body=given(model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, force=force, dry_run=dry_run, timeout_secs=timeout_secs),
        mutation=True,
    )


def list_scale_ops_call(
    *,
    role: str | None = None,
    kind: Literal["scale_out", "scale_in"] | None = None,
    status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"] | None = None,
    model_name: str | None = None,
) -> Call[ListScaleOpsResult]:
    return Call(
        "GET",
        "/admin/scale_ops",
        result_of(ListScaleOpsResult),
        params=query(given(role=role, kind=kind, status=status, model_name=model_name)),
        admin=False,
    )


def get_scale_op_call(request_id: str) -> Call[GetScaleOpResult]:
    return Call(
        "GET",
        f"/admin/scale_ops/{q(request_id)}",
        result_of(GetScaleOpResult),
        admin=False,
    )


def cancel_scale_op_call(request_id: str) -> Call[CancelScaleOpResult]:
    return Call(
        "POST",
        f"/admin/scale_ops/{q(request_id)}/cancel",
        result_of(CancelScaleOpResult),
        body={},
        mutation=True,
    )


def list_phases_call() -> Call[ListPhasesResult]:
    return Call(
        "GET",
        "/admin/phases",
        result_of(ListPhasesResult),
        admin=False,
    )


def advance_phase_call(*, group: str | None = None, to: str | None = None) -> Call[Transition]:
    return Call(
        "POST",
        "/admin/phases/advance",
        result_of(Transition),
        body=given(group=group, to=to),
        mutation=True,
    )


def resolve_lease_call(phase: str, *, group: str | None = None, note: str | None = None) -> Call[Lease]:
    return Call(
        "POST",
        "/admin/phases/resolve",
        result_of(Lease),
        body={"phase": phase, **given(group=group, note=note)},
        mutation=True,
    )


def wait_barrier_call(phase: str, *, group: str | None = None, timeout_s: float = 600) -> Call[Lease]:
    return Call(
        "POST",
        "/admin/barriers/wait",
        result_of(Lease),
        body={"phase": phase, **given(group=group, timeout_s=timeout_s)},
        admin=False,
        timeout=timeout_s + WAIT_MARGIN_S,
        retry=False,
    )


def release_barrier_call(phase: str, *, group: str | None = None) -> Call[Transition]:
    return Call(
        "POST",
        "/admin/barriers/release",
        result_of(Transition),
        body={"phase": phase, **given(group=group)},
        mutation=True,
    )


def submit_batch_call(
    kind: Literal["genrm_score", "teacher_logprobs"],
    samples: Sequence[JsonValue],
    *,
    model: str | None = None,
) -> Call[Batch]:
    return Call(
        "POST",
        "/admin/batches",
        result_of(Batch),
        body={"kind": kind, "samples": samples, **given(model=model)},
        mutation=True,
    )


def list_batches_call(
    *,
    state: Literal["open", "sealed", "running", "committed", "failed"] | None = None,
    role: str | None = None,
) -> Call[ListBatchesResult]:
    return Call(
        "GET",
        "/admin/batches",
        result_of(ListBatchesResult),
        params=query(given(state=state, role=role)),
        admin=False,
    )


def get_batch_call(id: str, *, after: str | None = None, limit: int = 1000) -> Call[BatchPage]:
    return Call(
        "GET",
        f"/admin/batches/{q(id)}",
        result_of(BatchPage),
        params=query(given(after=after, limit=limit)),
        admin=False,
    )


def list_events_call(
    *,
    after: int | None = None,
    limit: int = 200,
    kind: str | None = None,
    subject: str | None = None,
) -> Call[ListEventsResult]:
    return Call(
        "GET",
        "/admin/events",
        result_of(ListEventsResult),
        params=query(given(after=after, limit=limit, kind=kind, subject=subject)),
        admin=False,
    )


class Commands(ABC):
    """Every command of the table as a method of its name (UisClient runs them)."""

    @abstractmethod
    def run(self, call: Call[T], operation_id: str | None = None) -> T:
        """Sends one call: token, operation id, retries, typed errors."""

    def activate(
        self,
        role: str,
        *,
        tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
        operation_id: str | None = None,
    ) -> None:
        """Onload every model of a role (409 phase_not_resident outside the role's phase)"""
        return self.run(activate_call(role, tags=tags), operation_id)

    def drain(
        self,
        role: str,
        *,
        deadline_ms: int | None = None,
        policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
        operation_id: str | None = None,
    ) -> OffloadReport:
        """Drain every model of a role: stop new work, wait for in-flight work, release GPU memory; in force
        (across a restart too) until the role's next activation"""
        return self.run(drain_call(role, deadline_ms=deadline_ms, policy=policy), operation_id)

    def deactivate(self, role: str, *, operation_id: str | None = None) -> OffloadReport:
        """Sleep every model of a role now, aborting in-flight work"""
        return self.run(deactivate_call(role), operation_id)

    def activate_model(
        self,
        role: str,
        model: str,
        *,
        tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
        operation_id: str | None = None,
    ) -> ModelActivation:
        """Onload one model; outside its phase only an operator's hold is lifted (it onloads with its phase)"""
        return self.run(activate_model_call(role, model, tags=tags), operation_id)

    def drain_model(
        self,
        role: str,
        model: str,
        *,
        deadline_ms: int | None = None,
        policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
        operation_id: str | None = None,
    ) -> OffloadReport:
        """Drain one model and hold it asleep across phase changes and restarts until it is activated"""
        return self.run(drain_model_call(role, model, deadline_ms=deadline_ms, policy=policy), operation_id)

    def deactivate_model(self, role: str, model: str, *, operation_id: str | None = None) -> OffloadReport:
        """Sleep one model now, aborting in-flight work instead of waiting for it"""
        return self.run(deactivate_model_call(role, model), operation_id)

    def list_roles(self) -> ListRolesResult:
        """Every role's manager state: models, desire, holds, replicas"""
        return self.run(list_roles_call())

    def list_intents(self) -> ListIntentsResult:
        """The operator's standing drains and holds: what a restart re-applies before it serves"""
        return self.run(list_intents_call())

    def update_weights(
        self,
        role: str,
        model: str,
        body: UpdateWeightsBody,
        *,
        operation_id: str | None = None,
    ) -> WeightUpdate:
        """Load new weights into every replica of a model (disk, a version tag, or NCCL from the trainer)"""
        return self.run(update_weights_call(role, model, body), operation_id)

    def switch_weights(
        self,
        role: str,
        model: str,
        mode: Literal["drain", "pause_in_place", "abort"],
        update: SwitchWeightsUpdateDisk | SwitchWeightsUpdateVersion | SwitchWeightsUpdateDistributedUpdate | SwitchWeightsUpdateTensor,
        *,
        mixed_versions: Literal["forbid", "allow"] = "forbid",
        on_failure: Literal["quarantine", "rollback"] = "quarantine",
        deadline_ms: int | None = None,
        operation_id: str | None = None,
    ) -> WeightSwitch:
        """Switch every replica of a model to new weights as one step (mode drain, pause_in_place or abort);
        failed replicas are quarantined"""
        return self.run(switch_weights_call(role, model, mode, update, mixed_versions=mixed_versions, on_failure=on_failure, deadline_ms=deadline_ms), operation_id)

    def weight_switches(self, role: str, model: str) -> WeightSwitches:
        """A model's weight switches, oldest first: mode, duration, outcome and each replica's version"""
        return self.run(weight_switches_call(role, model))

    def abort_request(
        self,
        role: str,
        *,
        rid: str | None = None,
        abort_all: bool | None = None,
        model: str | None = None,
        operation_id: str | None = None,
    ) -> AbortRequestResult:
        """Abort a request by rid at the replica that holds it, or abort_all of a model or role; each caller
        gets its partial output (finish_reason abort). 404 unknown_rid when the rid is not in flight
        through the gateway"""
        return self.run(abort_request_call(role, rid=rid, abort_all=abort_all, model=model), operation_id)

    def register_external(
        self,
        role: str,
        model: str,
        url: str,
        *,
        operation_id: str | None = None,
    ) -> RegisterExternalResult:
        """Attach an engine started elsewhere to a model, by URL"""
        return self.run(register_external_call(role, model, url), operation_id)

    def unregister_external(
        self,
        role: str,
        engine_id: str,
        *,
        operation_id: str | None = None,
    ) -> UnregisterExternalResult:
        """Detach an external engine (it keeps running)"""
        return self.run(unregister_external_call(role, engine_id), operation_id)

    def restart_replica(
        self,
        role: str,
        engine_id: str,
        *,
        operation_id: str | None = None,
    ) -> RestartReplicaResult:
        """Stop and relaunch one replica (a sleeping model relaunches it when it onloads)"""
        return self.run(restart_replica_call(role, engine_id), operation_id)

    def list_replicas(self, role: str, model: str) -> ModelReplicas:
        """A model's replicas with URL, state, version, TP/PP and each rank's node and GPU id"""
        return self.run(list_replicas_call(role, model))

    def get_replica(self, role: str, engine_id: str) -> GetReplicaResult:
        """One replica by engine id: URL, state, weight version, ranks and GPUs"""
        return self.run(get_replica_call(role, engine_id))

    def scale_out(
        self,
        role: str,
        *,
        model_name: str | None = None,
        num_replicas: int = 0,
        engine_urls: Sequence[str] | None = None,
        timeout_secs: float | None = None,
        partial_success_policy: Literal["rollback_all", "keep_partial"] = "rollback_all",
        operation_id: str | None = None,
    ) -> ScaleOutResult:
        """Scale a model out to num_replicas (absolute; NOOP when met) or attach engine_urls; new replicas
        join prechecked at the model's weight version"""
        return self.run(scale_out_call(role, model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, timeout_secs=timeout_secs, partial_success_policy=partial_success_policy), operation_id)

    def scale_in(
        self,
        role: str,
        *,
        model_name: str | None = None,
        num_replicas: int = 0,
        engine_urls: Sequence[str] | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout_secs: float | None = None,
        operation_id: str | None = None,
    ) -> ScaleInResult:
        """Scale a model in to num_replicas or remove engine_urls: newest first, drained (timeout_secs),
        initial replicas only with force; dry_run previews"""
        return self.run(scale_in_call(role, model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, force=force, dry_run=dry_run, timeout_secs=timeout_secs), operation_id)

    def list_scale_ops(
        self,
        *,
        role: str | None = None,
        kind: Literal["scale_out", "scale_in"] | None = None,
        status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"] | None = None,
        model_name: str | None = None,
    ) -> ListScaleOpsResult:
        """Scale operations, newest first, by role, kind, status and model"""
        return self.run(list_scale_ops_call(role=role, kind=kind, status=status, model_name=model_name))

    def get_scale_op(self, request_id: str) -> GetScaleOpResult:
        """One scale operation by request id: its state, engines, failures and weight version"""
        return self.run(get_scale_op_call(request_id))

    def cancel_scale_op(self, request_id: str, *, operation_id: str | None = None) -> CancelScaleOpResult:
        """Cancel a running scale-out: every replica it added is stopped and removed"""
        return self.run(cancel_scale_op_call(request_id), operation_id)

    def list_phases(self) -> ListPhasesResult:
        """The activation lease of every group"""
        return self.run(list_phases_call())

    def advance_phase(
        self,
        *,
        group: str | None = None,
        to: str | None = None,
        operation_id: str | None = None,
    ) -> Transition:
        """Move an activation group to its next phase (or to `to`): drain, release memory, onload"""
        return self.run(advance_phase_call(group=group, to=to), operation_id)

    def resolve_lease(
        self,
        phase: str,
        *,
        group: str | None = None,
        note: str | None = None,
        operation_id: str | None = None,
    ) -> Lease:
        """Unblock a blocked lease: the engines are brought to `phase` (the others drained with proof, its
        residents onloaded), or the lease is blocked again naming the engines that contradict it"""
        return self.run(resolve_lease_call(phase, group=group, note=note), operation_id)

    def wait_barrier(self, phase: str, *, group: str | None = None, timeout_s: float = 600) -> Lease:
        """Wait (up to timeout_s) until `phase` is resident; the trainer blocks here"""
        return self.run(wait_barrier_call(phase, group=group, timeout_s=timeout_s))

    def release_barrier(
        self,
        phase: str,
        *,
        group: str | None = None,
        operation_id: str | None = None,
    ) -> Transition:
        """The trainer is done with `phase`: move the group on (e.g. train -> rollout)"""
        return self.run(release_barrier_call(phase, group=group), operation_id)

    def submit_batch(
        self,
        kind: Literal["genrm_score", "teacher_logprobs"],
        samples: Sequence[JsonValue],
        *,
        model: str | None = None,
        operation_id: str | None = None,
    ) -> Batch:
        """Create, fill and seal a deferred batch (GenRM messages or teacher token ids per sample)"""
        return self.run(submit_batch_call(kind, samples, model=model), operation_id)

    def list_batches(
        self,
        *,
        state: Literal["open", "sealed", "running", "committed", "failed"] | None = None,
        role: str | None = None,
    ) -> ListBatchesResult:
        """Deferred batches, by state and role"""
        return self.run(list_batches_call(state=state, role=role))

    def get_batch(self, id: str, *, after: str | None = None, limit: int = 1000) -> BatchPage:
        """One batch and, once committed, its outputs page by page (`after` a sample_id, at most `limit`)"""
        return self.run(get_batch_call(id, after=after, limit=limit))

    def list_events(
        self,
        *,
        after: int | None = None,
        limit: int = 200,
        kind: str | None = None,
        subject: str | None = None,
    ) -> ListEventsResult:
        """The audit log: transitions, leases, operator commands, replica deaths"""
        return self.run(list_events_call(after=after, limit=limit, kind=kind, subject=subject))


class AsyncCommands(ABC):
    """Every command of the table as a method of its name (AsyncUisClient runs them)."""

    @abstractmethod
    async def run(self, call: Call[T], operation_id: str | None = None) -> T:
        """Sends one call: token, operation id, retries, typed errors."""

    async def activate(
        self,
        role: str,
        *,
        tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
        operation_id: str | None = None,
    ) -> None:
        """Onload every model of a role (409 phase_not_resident outside the role's phase)"""
        return await self.run(activate_call(role, tags=tags), operation_id)

    async def drain(
        self,
        role: str,
        *,
        deadline_ms: int | None = None,
        policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
        operation_id: str | None = None,
    ) -> OffloadReport:
        """Drain every model of a role: stop new work, wait for in-flight work, release GPU memory; in force
        (across a restart too) until the role's next activation"""
        return await self.run(drain_call(role, deadline_ms=deadline_ms, policy=policy), operation_id)

    async def deactivate(self, role: str, *, operation_id: str | None = None) -> OffloadReport:
        """Sleep every model of a role now, aborting in-flight work"""
        return await self.run(deactivate_call(role), operation_id)

    async def activate_model(
        self,
        role: str,
        model: str,
        *,
        tags: Sequence[Literal["weights", "kv_cache", "cuda_graph"]] | None = None,
        operation_id: str | None = None,
    ) -> ModelActivation:
        """Onload one model; outside its phase only an operator's hold is lifted (it onloads with its phase)"""
        return await self.run(activate_model_call(role, model, tags=tags), operation_id)

    async def drain_model(
        self,
        role: str,
        model: str,
        *,
        deadline_ms: int | None = None,
        policy: Literal["wait", "abort", "retract", "in_place"] | None = None,
        operation_id: str | None = None,
    ) -> OffloadReport:
        """Drain one model and hold it asleep across phase changes and restarts until it is activated"""
        return await self.run(drain_model_call(role, model, deadline_ms=deadline_ms, policy=policy), operation_id)

    async def deactivate_model(
        self,
        role: str,
        model: str,
        *,
        operation_id: str | None = None,
    ) -> OffloadReport:
        """Sleep one model now, aborting in-flight work instead of waiting for it"""
        return await self.run(deactivate_model_call(role, model), operation_id)

    async def list_roles(self) -> ListRolesResult:
        """Every role's manager state: models, desire, holds, replicas"""
        return await self.run(list_roles_call())

    async def list_intents(self) -> ListIntentsResult:
        """The operator's standing drains and holds: what a restart re-applies before it serves"""
        return await self.run(list_intents_call())

    async def update_weights(
        self,
        role: str,
        model: str,
        body: UpdateWeightsBody,
        *,
        operation_id: str | None = None,
    ) -> WeightUpdate:
        """Load new weights into every replica of a model (disk, a version tag, or NCCL from the trainer)"""
        return await self.run(update_weights_call(role, model, body), operation_id)

    async def switch_weights(
        self,
        role: str,
        model: str,
        mode: Literal["drain", "pause_in_place", "abort"],
        update: SwitchWeightsUpdateDisk | SwitchWeightsUpdateVersion | SwitchWeightsUpdateDistributedUpdate | SwitchWeightsUpdateTensor,
        *,
        mixed_versions: Literal["forbid", "allow"] = "forbid",
        on_failure: Literal["quarantine", "rollback"] = "quarantine",
        deadline_ms: int | None = None,
        operation_id: str | None = None,
    ) -> WeightSwitch:
        """Switch every replica of a model to new weights as one step (mode drain, pause_in_place or abort);
        failed replicas are quarantined"""
        return await self.run(switch_weights_call(role, model, mode, update, mixed_versions=mixed_versions, on_failure=on_failure, deadline_ms=deadline_ms), operation_id)

    async def weight_switches(self, role: str, model: str) -> WeightSwitches:
        """A model's weight switches, oldest first: mode, duration, outcome and each replica's version"""
        return await self.run(weight_switches_call(role, model))

    async def abort_request(
        self,
        role: str,
        *,
        rid: str | None = None,
        abort_all: bool | None = None,
        model: str | None = None,
        operation_id: str | None = None,
    ) -> AbortRequestResult:
        """Abort a request by rid at the replica that holds it, or abort_all of a model or role; each caller
        gets its partial output (finish_reason abort). 404 unknown_rid when the rid is not in flight
        through the gateway"""
        return await self.run(abort_request_call(role, rid=rid, abort_all=abort_all, model=model), operation_id)

    async def register_external(
        self,
        role: str,
        model: str,
        url: str,
        *,
        operation_id: str | None = None,
    ) -> RegisterExternalResult:
        """Attach an engine started elsewhere to a model, by URL"""
        return await self.run(register_external_call(role, model, url), operation_id)

    async def unregister_external(
        self,
        role: str,
        engine_id: str,
        *,
        operation_id: str | None = None,
    ) -> UnregisterExternalResult:
        """Detach an external engine (it keeps running)"""
        return await self.run(unregister_external_call(role, engine_id), operation_id)

    async def restart_replica(
        self,
        role: str,
        engine_id: str,
        *,
        operation_id: str | None = None,
    ) -> RestartReplicaResult:
        """Stop and relaunch one replica (a sleeping model relaunches it when it onloads)"""
        return await self.run(restart_replica_call(role, engine_id), operation_id)

    async def list_replicas(self, role: str, model: str) -> ModelReplicas:
        """A model's replicas with URL, state, version, TP/PP and each rank's node and GPU id"""
        return await self.run(list_replicas_call(role, model))

    async def get_replica(self, role: str, engine_id: str) -> GetReplicaResult:
        """One replica by engine id: URL, state, weight version, ranks and GPUs"""
        return await self.run(get_replica_call(role, engine_id))

    async def scale_out(
        self,
        role: str,
        *,
        model_name: str | None = None,
        num_replicas: int = 0,
        engine_urls: Sequence[str] | None = None,
        timeout_secs: float | None = None,
        partial_success_policy: Literal["rollback_all", "keep_partial"] = "rollback_all",
        operation_id: str | None = None,
    ) -> ScaleOutResult:
        """Scale a model out to num_replicas (absolute; NOOP when met) or attach engine_urls; new replicas
        join prechecked at the model's weight version"""
        return await self.run(scale_out_call(role, model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, timeout_secs=timeout_secs, partial_success_policy=partial_success_policy), operation_id)

    async def scale_in(
        self,
        role: str,
        *,
        model_name: str | None = None,
        num_replicas: int = 0,
        engine_urls: Sequence[str] | None = None,
        force: bool = False,
        dry_run: bool = False,
        timeout_secs: float | None = None,
        operation_id: str | None = None,
    ) -> ScaleInResult:
        """Scale a model in to num_replicas or remove engine_urls: newest first, drained (timeout_secs),
        initial replicas only with force; dry_run previews"""
        return await self.run(scale_in_call(role, model_name=model_name, num_replicas=num_replicas, engine_urls=engine_urls, force=force, dry_run=dry_run, timeout_secs=timeout_secs), operation_id)

    async def list_scale_ops(
        self,
        *,
        role: str | None = None,
        kind: Literal["scale_out", "scale_in"] | None = None,
        status: Literal["PENDING", "CREATING", "CONNECTING", "HEALTH_CHECKING", "WEIGHT_SYNCING", "READY", "ACTIVE", "DRAINING", "REMOVING", "COMPLETED", "FAILED", "CANCELLED", "NOOP"] | None = None,
        model_name: str | None = None,
    ) -> ListScaleOpsResult:
        """Scale operations, newest first, by role, kind, status and model"""
        return await self.run(list_scale_ops_call(role=role, kind=kind, status=status, model_name=model_name))

    async def get_scale_op(self, request_id: str) -> GetScaleOpResult:
        """One scale operation by request id: its state, engines, failures and weight version"""
        return await self.run(get_scale_op_call(request_id))

    async def cancel_scale_op(
        self,
        request_id: str,
        *,
        operation_id: str | None = None,
    ) -> CancelScaleOpResult:
        """Cancel a running scale-out: every replica it added is stopped and removed"""
        return await self.run(cancel_scale_op_call(request_id), operation_id)

    async def list_phases(self) -> ListPhasesResult:
        """The activation lease of every group"""
        return await self.run(list_phases_call())

    async def advance_phase(
        self,
        *,
        group: str | None = None,
        to: str | None = None,
        operation_id: str | None = None,
    ) -> Transition:
        """Move an activation group to its next phase (or to `to`): drain, release memory, onload"""
        return await self.run(advance_phase_call(group=group, to=to), operation_id)

    async def resolve_lease(
        self,
        phase: str,
        *,
        group: str | None = None,
        note: str | None = None,
        operation_id: str | None = None,
    ) -> Lease:
        """Unblock a blocked lease: the engines are brought to `phase` (the others drained with proof, its
        residents onloaded), or the lease is blocked again naming the engines that contradict it"""
        return await self.run(resolve_lease_call(phase, group=group, note=note), operation_id)

    async def wait_barrier(self, phase: str, *, group: str | None = None, timeout_s: float = 600) -> Lease:
        """Wait (up to timeout_s) until `phase` is resident; the trainer blocks here"""
        return await self.run(wait_barrier_call(phase, group=group, timeout_s=timeout_s))

    async def release_barrier(
        self,
        phase: str,
        *,
        group: str | None = None,
        operation_id: str | None = None,
    ) -> Transition:
        """The trainer is done with `phase`: move the group on (e.g. train -> rollout)"""
        return await self.run(release_barrier_call(phase, group=group), operation_id)

    async def submit_batch(
        self,
        kind: Literal["genrm_score", "teacher_logprobs"],
        samples: Sequence[JsonValue],
        *,
        model: str | None = None,
        operation_id: str | None = None,
    ) -> Batch:
        """Create, fill and seal a deferred batch (GenRM messages or teacher token ids per sample)"""
        return await self.run(submit_batch_call(kind, samples, model=model), operation_id)

    async def list_batches(
        self,
        *,
        state: Literal["open", "sealed", "running", "committed", "failed"] | None = None,
        role: str | None = None,
    ) -> ListBatchesResult:
        """Deferred batches, by state and role"""
        return await self.run(list_batches_call(state=state, role=role))

    async def get_batch(self, id: str, *, after: str | None = None, limit: int = 1000) -> BatchPage:
        """One batch and, once committed, its outputs page by page (`after` a sample_id, at most `limit`)"""
        return await self.run(get_batch_call(id, after=after, limit=limit))

    async def list_events(
        self,
        *,
        after: int | None = None,
        limit: int = 200,
        kind: str | None = None,
        subject: str | None = None,
    ) -> ListEventsResult:
        """The audit log: transitions, leases, operator commands, replica deaths"""
        return await self.run(list_events_call(after=after, limit=limit, kind=kind, subject=subject))
