"""Answers of the admin and serving APIs as pydantic models. Unknown fields are kept (``extra="allow"``): a newer
service may add fields without breaking an older client."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")

BatchKind = Literal["genrm_score", "teacher_logprobs"]
BatchState = Literal["open", "sealed", "running", "committed", "failed"]
DrainPolicy = Literal["wait", "abort", "retract", "in_place"]
MemoryTag = Literal["weights", "kv_cache", "cuda_graph"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Operation(_Model, Generic[T]):
    """A mutation's answer: ``{ok, operation_id, result}``."""

    ok: bool
    operation_id: str | None = None
    result: T


class Lease(_Model):
    """An activation group's lease: which phase holds its GPUs, and its status."""

    group: str
    phase: str | None = None
    holder: list[str] | None = None
    status: str
    reason: str | None = None
    target: str | None = None
    #: Proof recorded at the last transition: the roles that left and whether each engine released its memory.
    last_release: dict[str, Any] | None = None
    #: When the lease entered its status (epoch ms).
    since: float


class Batch(_Model):
    id: str
    kind: BatchKind
    role: str
    model: str | None = None
    state: BatchState
    reason: str | None = None
    attempts: int = 0
    samples: int = 0
    results: int = 0
    created_at: float | None = None
    updated_at: float | None = None
    committed_at: float | None = None


class BatchSample(_Model):
    sample_id: str
    output: dict[str, Any] | None = None


class BatchPage(_Model):
    """One page of a committed batch's outputs; ``next_after`` continues it (None at the end)."""

    batch: Batch
    samples: list[BatchSample] = Field(default_factory=list)
    next_after: str | None = None


class Event(_Model):
    seq: int
    #: Epoch ms.
    at: float
    duration_ms: float | None = None
    kind: str
    subject: str | None = None
    actor: str | None = None
    operation_id: str | None = None
    data: Any = None


class OpenAIModel(_Model):
    id: str
    object: str = "model"
    created: int
    owned_by: str | None = None
    root: str | None = None
    state: str | None = None
    alias_of: str | None = None
    #: Root ``/v1/models`` only: the role serving the model.
    role: str | None = None


class ModelList(_Model):
    object: str = "list"
    data: list[OpenAIModel]


class Health(_Model):
    status: str
    role: str
    phase: str | None = None
    topology_revision: int
    registry_epoch: str | None = None
    can_serve: bool
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ReplicaRank(_Model):
    rank: int
    node: str
    node_ip: str | None = None
    node_rank: int
    gpu_id: int


class ModelReplica(_Model):
    engine_id: str
    replica: int
    group: int
    worker_type: Literal["regular", "prefill", "decode"]
    url: str | None
    state: str
    weight_version: str | None
    tp: int
    pp: int
    gpus_per_engine: int
    ranks: list[ReplicaRank]
    actual_gpus: list[dict[str, Any]] | None = None


class ModelReplicas(_Model):
    role: str
    model: str
    weight_version: str | None
    replicas: list[ModelReplica]


class GenrmSample(_Model):
    """A GenRM scoring input: OpenAI chat messages."""

    sample_id: str
    input: dict[str, Any]


def genrm_sample(sample_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """``{sample_id, input: {messages}}`` of a ``genrm_score`` batch."""
    return {"sample_id": sample_id, "input": {"messages": messages}}


def teacher_sample(sample_id: str, prompt_ids: list[int], response_ids: list[int]) -> dict[str, Any]:
    """``{sample_id, input: {input_ids, logprob_start_len, response_length}}`` of a ``teacher_logprobs`` batch:
    the teacher's logprobs of the response tokens given the prompt."""
    return {
        "sample_id": sample_id,
        "input": {
            "input_ids": [*prompt_ids, *response_ids],
            "logprob_start_len": len(prompt_ids),
            "response_length": len(response_ids),
        },
    }
