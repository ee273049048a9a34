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
from ._commands_gen import AsyncCommands
from ._transport import Settings, request_args, run_async
from .discovery import DiscoverySnapshot
from ._models_gen import AbortRequestResult
from .errors import NotFoundError, UisError
from .openai_stream import AsyncOpenAIStream
from .models import Batch, BatchSample, Health, Lease, ModelList, UpdateWeightsBody, WeightUpdate
from .rollout import Sample, min_version_headers
from .watcher import watch_async

if TYPE_CHECKING:
    import openai


class AsyncUisClient(AsyncCommands):
    """Every command of the table is a method of its name (``AsyncCommands``, generated), awaited; the helpers below
    are built on them."""

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
    ) -> dict[str, Any]:
        return await self.run(_calls.serve(role, "v1/chat/completions", body, headers))

    async def chat_completions_stream(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> AsyncOpenAIStream:
        """``UisClient.chat_completions_stream``: ``async for`` its chunks, then ``.spans``."""
        return await self._openai_stream(role, "v1/chat/completions", body, headers)

    async def completions_stream(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> AsyncOpenAIStream:
        """``UisClient.completions_stream``: ``async for`` its chunks, then ``.spans``."""
        return await self._openai_stream(role, "v1/completions", body, headers)

    async def _openai_stream(
        self, role: str, path: str, body: dict[str, Any], headers: dict[str, str] | None
    ) -> AsyncOpenAIStream:
        args = request_args(self.settings, _calls.serve(role, path, {**body, "stream": True}, headers), None)
        return await AsyncOpenAIStream.open(await self._http.send(self._http.build_request(**args), stream=True))

    async def abort(self, role: str, rid: str) -> bool:
        """``UisClient.abort``: False when no request with ``rid`` is in flight (it finished first)."""
        try:
            await self.run(_calls.abort_request(role, {"rid": rid}))
        except NotFoundError as e:
            if e.code == "unknown_rid":
                return False
            raise
        return True

    async def abort_all(self, role: str, model: str | None = None) -> AbortRequestResult:
        body: dict[str, Any] = {"abort_all": True}
        if model is not None:
            body["model"] = model
        return await self.run(_calls.abort_request(role, body))

    async def generate_sample(
        self, role: str, sample: Sample, *, min_weight_version: str | None = None
    ) -> Sample:
        """``UisClient.generate_sample``: one attempt, absorbed into ``sample``."""
        answer = await self.generate(role, sample.request(), min_version_headers(min_weight_version))
        return sample.absorb(answer)

    async def resume(self, role: str, sample: Sample, *, min_weight_version: str | None = None) -> Sample:
        if not sample.interrupted:
            raise ValueError(f"sample {sample.rid} is not interrupted (finish_reason {sample.finish_reason})")
        return await self.generate_sample(role, sample, min_weight_version=min_weight_version)

    def watch(self, role: str, poll_timeout_s: float = 30.0) -> AsyncGenerator[DiscoverySnapshot, None]:
        """``async for snapshot in client.watch("rollout")``: now, then each newer topology."""
        return watch_async(self._http, self.settings, role, poll_timeout_s)

    def openai(self, role: str | None = None, **kwargs: Any) -> openai.AsyncOpenAI:
        import openai

        base = f"{self.settings.base_url}/{role}/v1" if role else f"{self.settings.base_url}/v1"
        token = self.settings.serving_token or self.settings.admin_token or "uis"
        return openai.AsyncOpenAI(base_url=base, api_key=token, **kwargs)

    # ---- helpers built on the commands (each command is a method of its name: ``AsyncCommands``) -----------------

    async def update_weights_from_disk(
        self, role: str, model: str, model_path: str, weight_version: str, *, operation_id: str | None = None
    ) -> WeightUpdate:
        """``update_weights`` from a checkpoint on the engines' disk."""
        body: UpdateWeightsBody = {"source": "disk", "model_path": model_path, "weight_version": weight_version}
        return await self.update_weights(role, model, body, operation_id=operation_id)

    async def set_weight_version(
        self, role: str, model: str, weight_version: str, *, operation_id: str | None = None
    ) -> WeightUpdate:
        """Commits ``weight_version`` as the model's version (after weights were pushed to every replica)."""
        return await self.update_weights(
            role, model, {"source": "version", "weight_version": weight_version}, operation_id=operation_id
        )

    async def advance_and_wait(
        self, wait_for: str, group: str | None = None, to: str | None = None, timeout_s: float = 600.0
    ) -> Lease:
        """Waits at ``wait_for``'s barrier while the phase advances; the lease once the barrier opens."""
        barrier = asyncio.ensure_future(self.wait_barrier(wait_for, group=group, timeout_s=timeout_s))
        try:
            await self.advance_phase(group=group, to=to)
        except BaseException:
            barrier.cancel()
            raise
        return await barrier

    # ---- deferred batches -----------------------------------------------------------------------------------

    async def wait_batch(self, batch_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> Batch:
        """Blocks until the batch is committed; a failed batch raises ``batch_failed`` with the reason."""
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        while True:
            batch = (await self.get_batch(batch_id, limit=1)).batch
            if batch.state == "failed":
                raise UisError("batch_failed", batch.reason or "batch failed", status=409, details=batch)
            if batch.state == "committed":
                return batch
            if time.monotonic() + delay > deadline:
                raise UisError("batch_timeout", f"batch {batch_id} is {batch.state} after {timeout_s}s", status=0)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    async def batch_results(self, batch_id: str, page_size: int = 500) -> AsyncIterator[BatchSample]:
        """Every sample's output of a committed batch, read page by page (``get_batch``)."""
        after: str | None = None
        while True:
            page = await self.get_batch(batch_id, after=after, limit=page_size)
            samples = page.samples or []
            for sample in samples:
                yield sample
            if page.next_after is None or not samples:
                return
            after = page.next_after
