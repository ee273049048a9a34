"""Weights from tensors: the colocated path of slime, verl and Relax, where the trainer pushes its tensors to every
engine of a model with SGLang's ``update_weights_from_tensor``, then commits the version through the admin API so
the replicas' eligibility (``X-Min-Weight-Version``) and discovery follow.

SGLang's wire format (``UpdateWeightsFromTensorReqInput``): ``{"serialized_named_tensors": [one entry per TP rank,
rank i at index i], "load_format": str | null, "flush_cache": bool, "abort_all_requests": bool,
"weight_version": str | null}``; over HTTP each entry is the rank's serialized named tensors as a string
(SGLang's ``MultiprocessingSerializer.serialize(..., output_str=True)``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from .errors import ConflictError, UisError, error_from_response
from .models import ModelReplica, WeightUpdate

if TYPE_CHECKING:
    from .client import UisClient


@dataclass(frozen=True)
class TensorPush:
    """What ``push_tensor_weights`` did: the replicas it updated, and the service's answer to the version commit."""

    weight_version: str
    engines: list[str]
    commit: WeightUpdate


Serialized = Sequence[str] | Callable[[ModelReplica], Sequence[str]]


def push_tensor_weights(
    client: UisClient,
    role: str,
    model: str,
    weight_version: str,
    serialized: Serialized,
    *,
    load_format: str | None = None,
    flush_cache: bool = True,
    abort_all_requests: bool = False,
    timeout_s: float = 600.0,
) -> TensorPush:
    """Pushes ``update_weights_from_tensor`` to every replica of ``role``/``model``, then commits ``weight_version``.

    ``serialized`` is one string per TP rank, or a function of the replica (its ``ranks`` name each rank's node and
    GPU) returning them. Every replica must be ``ready`` (holding its weights): a sleeping replica cannot take
    tensors, and nothing is pushed at all if one is not. A replica that refuses stops the push before the commit, so
    the old version stays the served one."""
    replicas = client.list_replicas(role, model).replicas
    not_ready = [f"{r.engine_id}={r.state}" for r in replicas if r.state != "ready" or r.url is None]
    if not_ready:
        raise ConflictError(
            "replica_not_ready",
            f"{role}/{model}: every replica must be ready to take tensors ({', '.join(not_ready)}); run the push in "
            "the model's phase, or onload its weights first (activate_model with tags=['weights'])",
            status=409,
            path="model",
            details={"replicas": not_ready},
        )
    bodies: list[tuple[ModelReplica, dict[str, Any]]] = []
    for r in replicas:
        tensors = list(serialized(r) if callable(serialized) else serialized)
        if len(tensors) != r.tp:
            raise ValueError(
                f"{r.engine_id} runs tp={r.tp}: give one serialized entry per TP rank, not {len(tensors)}"
            )
        body: dict[str, Any] = {
            "serialized_named_tensors": tensors,
            "load_format": load_format,
            "flush_cache": flush_cache,
            "abort_all_requests": abort_all_requests,
            "weight_version": weight_version,
        }
        bodies.append((r, body))
    with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0)) as engines:
        for r, body in bodies:
            assert r.url is not None
            response = engines.post(f"{r.url}/update_weights_from_tensor", json=body)
            if response.status_code >= 400:
                error = error_from_response(response)
                raise UisError(
                    "engine_weight_update_failed",
                    f"{r.engine_id} refused update_weights_from_tensor: {error.message}",
                    status=response.status_code,
                    path=r.url,
                    details={"engine_id": r.engine_id, "engine_error": error.details or error.message},
                )
            answer = response.json()
            if isinstance(answer, dict) and answer.get("success") is False:
                raise UisError(
                    "engine_weight_update_failed",
                    f"{r.engine_id}: {answer.get('message')}",
                    status=502,
                    path=r.url,
                    details={"engine_id": r.engine_id},
                )
    commit = client.set_weight_version(role, model, weight_version)
    return TensorPush(weight_version, [r.engine_id for r, _ in bodies], commit)
