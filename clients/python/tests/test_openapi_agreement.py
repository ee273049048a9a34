"""The client agrees with the service's OpenAPI document (fetched from a running service): every command of the
table is a method of its name on both clients, with the command's fields as parameters and a typed answer; every
pydantic model declares only properties of the schema the service documents for that answer, and every property the
schema requires; each call goes to its command's route with the token the command asks for."""

from __future__ import annotations

import inspect
import re
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from uis_client import AsyncUisClient, UisClient, _commands_gen
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


def _commands(doc: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every admin command the service documents: name -> (method, path template, operation)."""
    return {
        op["operationId"]: (method.upper(), path, op)
        for path, ops in doc["paths"].items()
        if path.startswith("/admin/")
        for method, op in ops.items()
    }


def _fields(op: dict[str, Any]) -> set[str]:
    """The names a caller gives a command: path and query parameters, and the body's fields (a body that is not an
    object, e.g. a weight update, is one parameter ``body``); ``operation_id`` when it takes one."""
    names = {p["name"] for p in op.get("parameters", []) if p["in"] in ("path", "query")}
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        names |= set(body["properties"]) if body.get("type") == "object" else {"body"}
    return names | ({"operation_id"} if op["x-uis-idempotent"] else set())


#: Public methods that are not commands: serving, discovery, and helpers built on the commands.
HELPERS = {
    "abort": "the role's /abort_request {rid} with the serving token (abort_request is the admin door)",
    "abort_all": "the role's /abort_request {abort_all, model}",
    "advance_and_wait": "a barrier wait while the phase advances (wait_barrier + advance_phase)",
    "barrier_future": "wait_barrier in a background thread",
    "batch_results": "get_batch page by page",
    "chat_completions": "serving through the gateway",
    "chat_completions_stream": "a streamed chat through the gateway, read past [DONE] (uis_client.openai_stream)",
    "completions_stream": "a streamed completion through the gateway, read past [DONE] (uis_client.openai_stream)",
    "close": "closes the HTTP client",
    "aclose": "closes the HTTP client",
    "direct": "the DirectClient (routing in the caller)",
    "engines": "discovery",
    "generate": "serving through the gateway",
    "generate_sample": "one attempt of a rollout sample through generate (uis_client.rollout)",
    "health": "discovery",
    "models": "the role's OpenAI model list",
    "openai": "the official openai client on the role's routes",
    "resume": "generate_sample for an interrupted sample",
    "push_tensor_weights": "update_weights_from_tensor to every replica (list_replicas), then set_weight_version",
    "run": "sends a Call",
    "set_weight_version": "update_weights with source=version",
    "update_weights_from_disk": "update_weights with source=disk",
    "wait_batch": "get_batch until the batch is committed",
    "watch": "the discovery watcher",
}


@pytest.mark.parametrize("client_class", [UisClient, AsyncUisClient])
def test_every_command_is_a_method_of_its_name_with_its_fields(
    document: dict[str, Any], client_class: type[Any]
) -> None:
    commands = _commands(document)
    assert len(commands) >= 20
    for name, (_, _, op) in commands.items():
        method = getattr(client_class, name, None)
        assert callable(method), f"{client_class.__name__} has no method {name} (the command table's name)"
        assert inspect.iscoroutinefunction(method) == (client_class is AsyncUisClient), name
        signature = inspect.signature(method, eval_str=True)
        assert set(signature.parameters) - {"self"} == _fields(op), name
        assert signature.return_annotation is not Any, f"{name} returns Any"
    # A command under another name would be a public method that is neither a command nor a listed helper.
    public = {n for n in dir(client_class) if not n.startswith("_") and callable(getattr(client_class, n))}
    assert public - set(commands) - set(HELPERS) == set()


def test_every_answer_model_agrees_with_its_result_schema(document: dict[str, Any]) -> None:
    for name, (_, _, op) in _commands(document).items():
        answer = inspect.signature(getattr(UisClient, name), eval_str=True).return_annotation
        schema = op["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["result"]
        if answer is None:
            assert schema == {"type": "null"}, name
            continue
        _agree(answer, schema)
        assert {f.alias or n for n, f in answer.model_fields.items()} == set(schema["properties"]), name


def _dummy(parameter: inspect.Parameter) -> Any:
    annotation = str(parameter.annotation)
    return [] if "Sequence" in annotation else {} if parameter.name == "body" else "x"


def _admin_calls(doc: dict[str, Any]) -> list[tuple[str, Call[Any]]]:
    """One call of every command, as its generated factory builds it (required arguments only)."""
    calls = []
    for name in _commands(doc):
        factory = getattr(_commands_gen, f"{name}_call")
        required = [p for p in inspect.signature(factory).parameters.values() if p.default is inspect.Parameter.empty]
        calls.append((name, factory(*[_dummy(p) for p in required])))
    return calls


def test_each_call_goes_to_its_documented_route(document: dict[str, Any]) -> None:
    commands = _commands(document)
    for name, call in _admin_calls(document):
        method, template, _ = commands[name]
        assert call.method == method, name
        assert re.fullmatch(re.sub(r"\{[^}]+\}", "x", template), call.path), (name, call.path)


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
    for _, call in _admin_calls(document):
        op = _operation(document, call.method, call.path)
        admin_only = op["security"] == [{"adminToken": []}]
        assert call.admin == admin_only, f"{call.method} {call.path}: admin={call.admin}, security={op['security']}"
        assert op["x-uis-permission"] == ("admin" if admin_only else "serving")
