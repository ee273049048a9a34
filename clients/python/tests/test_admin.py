"""Admin commands, idempotency and the discovery watcher against the real demo."""

from __future__ import annotations

import uuid

import pytest

from uis_client import ConflictError, NotFoundError, UisClient


def test_drain_and_activate_a_model_seen_by_the_watcher(client: UisClient) -> None:
    with client.watch("rollout", poll_timeout_s=20) as watcher:
        before = watcher.snapshot
        assert before.models["policy-code"].state == "ready"
        client.drain_model("rollout", "policy-code", policy="abort", deadline_ms=0)
        # The long poll wakes on the publication: no polling interval to wait out.
        drained = watcher.wait_for(lambda s: s.models["policy-code"].state == "sleeping", timeout=60)
        assert drained.registry_epoch == before.registry_epoch
        assert drained.topology_revision > before.topology_revision
        assert drained.models["policy-code"].held is True
        # The operator's hold is a standing intent (a restart re-applies it) until the model is activated.
        intent = ("rollout", "policy-code", "held")
        assert intent in [(i.role, i.model, i.intent) for i in client.list_intents().intents]
        result = client.activate_model("rollout", "policy-code")
        assert result.onloaded is True
        assert intent not in [(i.role, i.model, i.intent) for i in client.list_intents().intents]
        watcher.wait_for(lambda s: s.models["policy-code"].state == "ready", timeout=60)
    assert watcher.last_error is None


def test_a_repeated_operation_id_returns_the_first_result(client: UisClient) -> None:
    op = f"pytest-{uuid.uuid4()}"
    first = client.set_weight_version("rollout", "policy-code", "v-idem", operation_id=op)
    again = client.set_weight_version("rollout", "policy-code", "v-idem", operation_id=op)
    assert again == first
    with pytest.raises(ConflictError) as info:
        client.set_weight_version("rollout", "policy-code", "v-other", operation_id=op)
    assert info.value.code == "operation_id_conflict"
    events = client.list_events(kind="admin.update_weights", subject="rollout/policy-code").events
    # Audited once as done (the repeat joined it), once as refused (the conflicting request).
    outcomes = sorted(e.data["ok"] is True for e in events if e.operation_id == op)
    assert outcomes == [False, True]


def test_every_read_command_answers_typed(client: UisClient) -> None:
    leases = client.list_phases().leases
    assert [lease.group for lease in leases] == ["actor"]
    roles = client.list_roles().roles
    assert set(roles) == {"rollout", "genrm", "teacher"}
    assert roles["rollout"].models["policy"].replicas[0].state == "ready"
    assert isinstance(client.list_batches(state="committed").batches, list)
    replica = client.get_replica("rollout", "policy/0")
    assert (replica.role, replica.model, replica.engine_id) == ("rollout", "policy", "policy/0")
    with pytest.raises(NotFoundError) as info:
        client.get_batch("no-such-batch")
    assert info.value.status == 404


def test_unknown_role_is_not_found_at_role(client: UisClient) -> None:
    with pytest.raises(NotFoundError) as info:
        client.drain("critic")
    assert (info.value.code, info.value.path) == ("unknown_role", "role")
