"""``AsyncUisClient``: the asyncio twin of ``UisClient`` (same methods, awaited). A barrier wait and a phase
advance run side by side with ``asyncio.gather`` or ``advance_and_wait``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx

from . import _calls
from ._calls import Call
from ._transport import Settings, run_async
from .discovery import DiscoverySnapshot
from .errors import UisError
from .models import Batch, BatchSample, Event, Health, Lease, ModelList, Operation
from .watcher import watch_async

if TYPE_CHECKING:
    import openai


class AsyncUisClient:
    def __init__(
        self,
        base_url: str,
        *,
        admin_token: str | None = None,
        serving_token: str | None = None,
        actor: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
    ) -> None:
        self.settings = Settings(
            base_url.rstrip("/"), admin_token, serving_token, actor, timeout, max_retries, max_retry_wait
        )
        self._http = httpx.AsyncClient(base_url=self.settings.base_url, timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncUisClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, call: Call[_calls.T], operation_id: str | None = None) -> _calls.T:
        return await run_async(self._http, self.settings, call, operation_id)

    async def _result(self, call: Call[Operation[Any]], operation_id: str | None) -> Any:
        return (await self.run(call, operation_id)).result

    # ---- serving and discovery ------------------------------------------------------------------------------

    async def engines(self, role: str, model_name: str | None = None) -> DiscoverySnapshot:
        return await self.run(_calls.engines(role, model_name))

    async def health(self, role: str) -> Health:
        return await self.run(_calls.health(role))

    async def models(self, role: str) -> ModelList:
        return await self.run(_calls.models(role))

    async def generate(self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        return await self.run(_calls.serve(role, "generate", body, headers))

    async def chat_completions(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Any:
        return await self.run(_calls.serve(role, "v1/chat/completions", body, headers))

    def watch(self, role: str, poll_timeout_s: float = 30.0) -> AsyncGenerator[DiscoverySnapshot, None]:
        """``async for snapshot in client.watch("rollout")``: now, then each newer topology."""
        return watch_async(self._http, self.settings, role, poll_timeout_s)

    def openai(self, role: str | None = None, **kwargs: Any) -> openai.AsyncOpenAI:
        import openai

        base = f"{self.settings.base_url}/{role}/v1" if role else f"{self.settings.base_url}/v1"
        token = self.settings.serving_token or self.settings.admin_token or "uis"
        return openai.AsyncOpenAI(base_url=base, api_key=token, **kwargs)

    # ---- admin commands -------------------------------------------------------------------------------------

    async def activate_role(self, role: str, tags: list[str] | None = None, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.activate_role(role, tags), operation_id)

    async def drain_role(
        self, role: str, *, deadline_ms: int | None = None, policy: str | None = None, operation_id: str | None = None
    ) -> Any:
        return await self._result(_calls.drain_role(role, deadline_ms, policy), operation_id)

    async def deactivate_role(self, role: str, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.deactivate_role(role), operation_id)

    async def activate_model(
        self, role: str, model: str, tags: list[str] | None = None, *, operation_id: str | None = None
    ) -> Any:
        return await self._result(_calls.activate_model(role, model, tags), operation_id)

    async def drain_model(
        self,
        role: str,
        model: str,
        *,
        deadline_ms: int | None = None,
        policy: str | None = None,
        operation_id: str | None = None,
    ) -> Any:
        return await self._result(_calls.drain_model(role, model, deadline_ms, policy), operation_id)

    async def deactivate_model(self, role: str, model: str, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.deactivate_model(role, model), operation_id)

    async def update_weights(
        self, role: str, model: str, body: dict[str, Any], *, operation_id: str | None = None
    ) -> Any:
        return await self._result(_calls.update_weights(role, model, body), operation_id)

    async def set_weight_version(
        self, role: str, model: str, weight_version: str, *, operation_id: str | None = None
    ) -> Any:
        body = {"source": "version", "weight_version": weight_version}
        return await self.update_weights(role, model, body, operation_id=operation_id)

    async def register_engine(self, role: str, model: str, url: str, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.register_engine(role, model, url), operation_id)

    async def unregister_engine(self, role: str, engine_id: str, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.unregister_engine(role, engine_id), operation_id)

    async def restart_replica(self, role: str, engine_id: str, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.restart_replica(role, engine_id), operation_id)

    async def roles(self) -> dict[str, Any]:
        return await self.run(_calls.roles())

    async def phases(self) -> list[Lease]:
        return await self.run(_calls.phases())

    async def advance_phase(
        self, group: str | None = None, to: str | None = None, *, operation_id: str | None = None
    ) -> Any:
        return await self._result(_calls.advance_phase(group, to), operation_id)

    async def resolve_lease(
        self, phase: str, group: str | None = None, note: str | None = None, *, operation_id: str | None = None
    ) -> Any:
        return await self._result(_calls.resolve_lease(phase, group, note), operation_id)

    async def wait_barrier(self, phase: str, group: str | None = None, timeout_s: float = 600.0) -> Lease:
        return await self.run(_calls.wait_barrier(phase, group, timeout_s))

    async def advance_and_wait(
        self, wait_for: str, group: str | None = None, to: str | None = None, timeout_s: float = 600.0
    ) -> Lease:
        """Waits at ``wait_for``'s barrier while the phase advances; the lease once the barrier opens."""
        barrier = asyncio.ensure_future(self.wait_barrier(wait_for, group, timeout_s))
        try:
            await self.advance_phase(group, to)
        except BaseException:
            barrier.cancel()
            raise
        return await barrier

    async def release_barrier(self, phase: str, group: str | None = None, *, operation_id: str | None = None) -> Any:
        return await self._result(_calls.release_barrier(phase, group), operation_id)

    # ---- deferred batches -----------------------------------------------------------------------------------

    async def submit_batch(
        self, kind: str, samples: list[dict[str, Any]], model: str | None = None, *, operation_id: str | None = None
    ) -> Batch:
        op: Operation[Batch] = await self.run(_calls.submit_batch(kind, samples, model), operation_id)
        return op.result

    async def batches(self, state: str | None = None, role: str | None = None) -> list[Batch]:
        return await self.run(_calls.batches(state, role))

    async def batch(self, batch_id: str) -> Batch:
        return (await self.run(_calls.batch_page(batch_id, None, 1))).batch

    async def wait_batch(self, batch_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> Batch:
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        while True:
            batch = await self.batch(batch_id)
            if batch.state == "failed":
                raise UisError("batch_failed", batch.reason or "batch failed", status=409, details=batch)
            if batch.state == "committed":
                return batch
            if time.monotonic() + delay > deadline:
                raise UisError("batch_timeout", f"batch {batch_id} is {batch.state} after {timeout_s}s", status=0)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    async def batch_results(self, batch_id: str, page_size: int = 500) -> AsyncIterator[BatchSample]:
        after: str | None = None
        while True:
            page = await self.run(_calls.batch_page(batch_id, after, page_size))
            for sample in page.samples:
                yield sample
            if page.next_after is None or not page.samples:
                return
            after = page.next_after

    async def events(
        self, after: int | None = None, limit: int | None = None, kind: str | None = None, subject: str | None = None
    ) -> list[Event]:
        return await self.run(_calls.events(after, limit, kind, subject))
