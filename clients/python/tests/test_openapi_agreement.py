"""The pydantic models agree with the service's OpenAPI document: every field a model declares is a property of
the schema the service documents for that answer, and every property the schema requires is a field of the model."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from uis_client import _calls
from uis_client._calls import Call
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


def _admin_calls() -> list[Call[Any]]:
    """One call of every admin command the client sends."""
    return [
        _calls.activate_role("r", None),
        _calls.drain_role("r", None, None),
        _calls.deactivate_role("r"),
        _calls.activate_model("r", "m", None),
        _calls.drain_model("r", "m", None, None),
        _calls.deactivate_model("r", "m"),
        _calls.update_weights("r", "m", {}),
        _calls.model_replicas("r", "m"),
        _calls.register_engine("r", "m", "http://e"),
        _calls.unregister_engine("r", "e"),
        _calls.restart_replica("r", "e"),
        _calls.roles(),
        _calls.phases(),
        _calls.advance_phase(None, None),
        _calls.resolve_lease("p", None, None),
        _calls.wait_barrier("p", None, 1.0),
        _calls.release_barrier("p", None),
        _calls.submit_batch("genrm_score", [], None),
        _calls.batches(None, None),
        _calls.batch_page("b", None, None),
        _calls.events(None, None, None, None),
    ]


def _operation(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The documented operation a concrete path is an instance of (the most literal template when several match)."""
    found = [
        (template.count("{"), ops[method.lower()])
        for template, ops in doc["paths"].items()
        if method.lower() in ops and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path)
    ]
    assert found, f"{method} {path} is not documented"
    operation: dict[str, Any] = min(found, key=lambda f: f[0])[1]
    return operation


def test_calls_send_the_token_the_document_asks_for(document: dict[str, Any]) -> None:
    """A call sent with the admin token is exactly one whose operation takes only the admin token; every other
    call (reads and waits) goes with the serving token when the client has one."""
    for call in _admin_calls():
        op = _operation(document, call.method, call.path)
        admin_only = op["security"] == [{"adminToken": []}]
        assert call.admin == admin_only, f"{call.method} {call.path}: admin={call.admin}, security={op['security']}"
        assert op["x-uis-permission"] == ("admin" if admin_only else "serving")
