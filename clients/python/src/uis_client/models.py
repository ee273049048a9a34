"""Answers of the admin and serving APIs as pydantic models. The admin commands' answers are generated from the
command table (``_models_gen.py``) and re-exported here; the serving answers below are written by hand. Unknown
fields are kept (``extra="allow"``): a newer service may add fields without breaking an older client."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import _models_gen
from ._models_gen import *  # noqa: F403 (the commands' answer models, listed in its __all__)

__all__ = ["Health", "ModelList", "OpenAIModel", "genrm_sample", "teacher_sample"]
__all__ += _models_gen.__all__


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


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
    # Relax's words: "healthy" when every model can serve now, else "unhealthy" (a role asleep in another phase).
    status: str
    service: str
    gateway_status: str
    instances: dict[str, dict[str, Any]] = Field(default_factory=dict)
    role: str
    phase: str | None = None
    topology_revision: int
    registry_epoch: str | None = None
    can_serve: bool
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)


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
