"""The asyncio client: the same commands, awaited; discovery as an async iterator."""

from __future__ import annotations

import asyncio

import pytest

from uis_client import AsyncUisClient, BadRequestError

from .conftest import Service


def test_async_reads_serving_and_errors(service: Service) -> None:
    async def main() -> None:
        async with AsyncUisClient(service.url, admin_token=service.token) as c:
            phases, snap, models = await asyncio.gather(c.list_phases(), c.engines("teacher"), c.models("rollout"))
            assert phases.leases[0].group == "actor"
            assert "math-teacher" in snap.models
            assert "actor" in {m.id for m in models.data}
            chat = await c.chat_completions("rollout", {"messages": [{"role": "user", "content": "hi"}]})
            assert chat["choices"][0]["message"]["content"]
            # An explicit unknown model is the caller's mistake: 400, as Relax's readers answer it.
            with pytest.raises(BadRequestError) as unknown:
                await c.generate("rollout", {"model": "nope", "text": "x"})
            assert unknown.value.code == "model_not_served" and unknown.value.path == "body.model"
            watch = c.watch("rollout", poll_timeout_s=5)
            first = await watch.__anext__()
            await c.drain_model("rollout", "policy-code", policy="abort", deadline_ms=0)
            changed = await asyncio.wait_for(watch.__anext__(), timeout=60)
            assert changed.topology_revision > first.topology_revision
            await c.activate_model("rollout", "policy-code")
            await watch.aclose()

    asyncio.run(main())
