"""Serving, discovery and typed errors against the real demo."""

from __future__ import annotations

import pytest

from uis_client import AuthenticationError, BadRequestError, UisClient, UnavailableError

from .conftest import Service

HI = [{"role": "user", "content": "hi"}]


def test_discovery_health_and_models_are_typed(client: UisClient) -> None:
    snap = client.engines("rollout")
    assert snap.role == "rollout" and snap.registry_epoch
    assert {"policy", "policy-code"} <= set(snap.models)
    assert all(e.base_url for e in snap.models["policy"].engines)
    health = client.health("genrm")
    assert health.role == "genrm" and health.topology_revision >= 1
    # The demo starts in rollout's phase: GenRM sleeps, and says so in Relax's words.
    assert (health.status, health.service, health.gateway_status) == ("unhealthy", "genrm", "healthy")
    assert client.health("rollout").status == "healthy"
    ids = {m.id for m in client.models("rollout").data}
    assert {"policy", "policy-code", "actor"} <= ids


def test_gateway_chat_and_generate(client: UisClient) -> None:
    chat = client.chat_completions("rollout", {"model": "actor", "messages": HI, "max_tokens": 8})
    assert chat["choices"][0]["message"]["content"]
    out = client.generate("rollout", {"route_key": "code", "text": "def f():", "sampling_params": {"max_new_tokens": 4}})
    assert isinstance(out["text"], str)


def test_unknown_model_is_a_bad_request_naming_the_path(client: UisClient) -> None:
    # 400, as the RFC's routing order and Relax's resolvers answer an explicit model the role does not serve.
    with pytest.raises(BadRequestError) as info:
        client.chat_completions("rollout", {"model": "nope", "messages": HI})
    assert (info.value.code, info.value.status, info.value.path) == ("model_not_served", 400, "body.model")
    assert "policy" in info.value.details["models"]


def test_sleeping_model_is_unavailable_with_retry_after(service: Service) -> None:
    # No retries: the 503 itself is what is checked here (the demo sits in its rollout phase: GenRM sleeps).
    with UisClient(service.url, admin_token=service.token, max_retries=0) as c:
        with pytest.raises(UnavailableError) as info:
            c.chat_completions("genrm", {"messages": HI})
    assert (info.value.code, info.value.status) == ("model_not_ready", 503)
    assert info.value.retry_after == 30
    assert info.value.details["state"] == "sleeping"


def test_wrong_admin_token_is_an_authentication_error(service: Service) -> None:
    # A mutation: reads follow the serving token, and the demo configures none (they are open, like discovery).
    with UisClient(service.url, admin_token="wrong") as c:
        with pytest.raises(AuthenticationError) as info:
            c.advance_phase(group="nope")
    assert (info.value.status, info.value.code) == (401, "unauthorized")
    with UisClient(service.url) as c:
        assert c.list_phases().leases
