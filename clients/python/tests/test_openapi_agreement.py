"""The pydantic models agree with the service's OpenAPI document: every field a model declares is a property of
the schema the service documents for that answer, and every property the schema requires is a field of the model."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from uis_client.discovery import DiscoveryEngine, DiscoveryModel, DiscoveryRouting, DiscoverySnapshot
from uis_client.models import Batch, BatchPage, Event, Health, Lease, ModelList, ModelReplicas, OpenAIModel

from .conftest import Service


@pytest.fixture(scope="module")
def document(service: Service) -> dict[str, Any]:
    doc: dict[str, Any] = httpx.get(f"{service.url}/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    return doc


def _answer(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    schema: dict[str, Any] = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    return schema


def _agree(model: type[BaseModel], schema: dict[str, Any]) -> None:
    props = set(schema.get("properties", {}))
    fields = {f.alias or name for name, f in model.model_fields.items()}
    assert fields <= props, f"{model.__name__} declares fields the service does not document: {fields - props}"
    required = set(schema.get("required", []))
    assert required <= fields, f"{model.__name__} lacks required fields {required - fields}"


def test_discovery_models_agree(document: dict[str, Any]) -> None:
    snap = _answer(document, "get", "/{role}/engines")
    _agree(DiscoverySnapshot, snap)
    model = snap["properties"]["models"]["additionalProperties"]
    _agree(DiscoveryModel, model)
    _agree(DiscoveryEngine, model["properties"]["engines"]["items"])
    _agree(DiscoveryRouting, snap["properties"]["routing"])


def test_health_and_model_list_agree(document: dict[str, Any]) -> None:
    _agree(Health, _answer(document, "get", "/{role}/health"))
    listing = _answer(document, "get", "/{role}/v1/models")
    _agree(ModelList, listing)
    _agree(OpenAIModel, listing["properties"]["data"]["items"])


def _result(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    schema: dict[str, Any] = _answer(doc, method, path)["properties"]["result"]
    return schema


def test_admin_answers_agree(document: dict[str, Any]) -> None:
    _agree(Lease, _result(document, "get", "/admin/phases")["properties"]["leases"]["items"])
    _agree(Lease, _result(document, "post", "/admin/barriers/wait"))
    _agree(Batch, _result(document, "post", "/admin/batches"))
    _agree(Batch, _result(document, "get", "/admin/batches")["properties"]["batches"]["items"])
    _agree(BatchPage, _result(document, "get", "/admin/batches/{id}"))
    _agree(Event, _result(document, "get", "/admin/events")["properties"]["events"]["items"])
    _agree(ModelReplicas, _result(document, "get", "/admin/roles/{role}/models/{model}/replicas"))
