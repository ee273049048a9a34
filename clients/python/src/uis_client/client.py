"""``UisClient``: the synchronous client of one uis service (serving, discovery and every admin command).

Barrier waits and phase advances work from one thread: ``advance_and_wait`` starts the trainer's barrier wait in a
background thread, advances the phase, and returns the lease once the barrier opens; ``barrier_future`` gives the
wait as a ``Future`` for other orders."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx

from . import _calls
from ._calls import Call
from ._commands_gen import Commands
from ._transport import Settings, request_args, run_sync
from .direct import DirectClient
from .discovery import DiscoverySnapshot
from ._models_gen import AbortRequestResult
from .errors import NotFoundError, UisError
from .openai_stream import OpenAIStream
from .models import Batch, BatchSample, Health, Lease, ModelList, UpdateWeightsBody, WeightUpdate
from .rollout import Sample, min_version_headers
from .watcher import DiscoveryWatcher
from .weights import Serialized, TensorPush, push_tensor_weights

if TYPE_CHECKING:
    import openai


class UisClient(Commands):
    """Every command of the table is a method of its name (``Commands``, generated); the helpers below are built
    on them."""

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
        self._http = httpx.Client(base_url=self.settings.base_url, timeout=timeout)
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> UisClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, call: Call[_calls.T], operation_id: str | None = None) -> _calls.T:
        return run_sync(self._http, self.settings, call, operation_id)

    # ---- serving and discovery ------------------------------------------------------------------------------

    def engines(self, role: str, model_name: str | None = None) -> DiscoverySnapshot:
        return self.run(_calls.engines(role, model_name))

    def health(self, role: str) -> Health:
        return self.run(_calls.health(role))

    def models(self, role: str) -> ModelList:
        return self.run(_calls.models(role))

    def generate(self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        """SGLang ``/generate`` through the role's gateway (``model`` / ``route_key`` choose the model)."""
        return self.run(_calls.serve(role, "generate", body, headers))

    def chat_completions(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """OpenAI chat through the role's gateway (``client.openai(role)`` for the official client)."""
        return self.run(_calls.serve(role, "v1/chat/completions", body, headers))

    def chat_completions_stream(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> OpenAIStream:
        """A streamed OpenAI chat through the role's gateway, read to the stream's end (past ``[DONE]``): its chunks,
        then ``.spans``, which output tokens each weight version made (see ``uis_client.openai_stream``)."""
        return self._openai_stream(role, "v1/chat/completions", body, headers)

    def completions_stream(
        self, role: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> OpenAIStream:
        """A streamed OpenAI completion through the role's gateway; as ``chat_completions_stream``."""
        return self._openai_stream(role, "v1/completions", body, headers)

    def _openai_stream(
        self, role: str, path: str, body: dict[str, Any], headers: dict[str, str] | None
    ) -> OpenAIStream:
        args = request_args(self.settings, _calls.serve(role, path, {**body, "stream": True}, headers), None)
        return OpenAIStream(self._http.send(self._http.build_request(**args), stream=True))

    def abort(self, role: str, rid: str) -> bool:
        """Aborts request ``rid`` at the replica the gateway sent it to; its caller gets the partial output
        (``finish_reason`` abort). False when no request with that rid is in flight (it finished first)."""
        try:
            self.run(_calls.abort_request(role, {"rid": rid}))
        except NotFoundError as e:
            if e.code == "unknown_rid":
                return False
            raise
        return True

    def abort_all(self, role: str, model: str | None = None) -> AbortRequestResult:
        """Aborts every request on every running replica of ``model`` (default: of the role)."""
        body: dict[str, Any] = {"abort_all": True}
        if model is not None:
            body["model"] = model
        return self.run(_calls.abort_request(role, body))

    def generate_sample(
        self, role: str, sample: Sample, *, min_weight_version: str | None = None
    ) -> Sample:
        """One attempt of a rollout sample through the gateway (the rest of its budget); the answer is absorbed
        into ``sample`` (output ids, which weight version made them, finish reason). See ``uis_client.rollout``."""
        answer = self.generate(role, sample.request(), min_version_headers(min_weight_version))
        return sample.absorb(answer)

    def resume(self, role: str, sample: Sample, *, min_weight_version: str | None = None) -> Sample:
        """Resumes an aborted or cut sample (``min_weight_version``: only on replicas at that version or newer)."""
        if not sample.interrupted:
            raise ValueError(f"sample {sample.rid} is not interrupted (finish_reason {sample.finish_reason})")
        return self.generate_sample(role, sample, min_weight_version=min_weight_version)

    def watch(self, role: str, poll_timeout_s: float = 30.0) -> DiscoveryWatcher:
        """A discovery watcher (``with client.watch("rollout") as w: ...``)."""
        return DiscoveryWatcher(self.settings, role, poll_timeout_s=poll_timeout_s)

    def direct(self, role: str, *, watch: bool = True) -> DirectClient:
        """Direct routing to the role's engines (``with client.direct("rollout") as d: d.generate(...)``)."""
        return DirectClient(self.settings, role, watch=watch)

    def openai(self, role: str | None = None, **kwargs: Any) -> openai.OpenAI:
        """An ``openai.OpenAI`` client on the role's OpenAI routes (``/<role>/v1``); without a role, the root
        ``/v1`` routes that find the role from the model name."""
        import openai

        base = f"{self.settings.base_url}/{role}/v1" if role else f"{self.settings.base_url}/v1"
        token = self.settings.serving_token or self.settings.admin_token or "uis"
        return openai.OpenAI(base_url=base, api_key=token, **kwargs)

    # ---- helpers built on the commands (each command is a method of its name: ``Commands``) ----------------------

    def update_weights_from_disk(
        self, role: str, model: str, model_path: str, weight_version: str, *, operation_id: str | None = None
    ) -> WeightUpdate:
        """``update_weights`` from a checkpoint on the engines' disk."""
        body: UpdateWeightsBody = {"source": "disk", "model_path": model_path, "weight_version": weight_version}
        return self.update_weights(role, model, body, operation_id=operation_id)

    def set_weight_version(
        self, role: str, model: str, weight_version: str, *, operation_id: str | None = None
    ) -> WeightUpdate:
        """Commits ``weight_version`` as the model's version (after weights were pushed to every replica)."""
        return self.update_weights(
            role, model, {"source": "version", "weight_version": weight_version}, operation_id=operation_id
        )

    def push_tensor_weights(
        self, role: str, model: str, weight_version: str, serialized: Serialized, **kw: Any
    ) -> TensorPush:
        """``update_weights_from_tensor`` to every replica, then the version commit (see ``uis_client.weights``)."""
        return push_tensor_weights(self, role, model, weight_version, serialized, **kw)

    def barrier_future(self, phase: str, group: str | None = None, timeout_s: float = 600.0) -> Future[Lease]:
        """The barrier wait in a background thread, for calls that must happen while it waits."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="uis-barrier")
        return self._pool.submit(self.wait_barrier, phase, group=group, timeout_s=timeout_s)

    def advance_and_wait(
        self, wait_for: str, group: str | None = None, to: str | None = None, timeout_s: float = 600.0
    ) -> Lease:
        """The trainer's step from one thread: wait at ``wait_for``'s barrier while the phase advances (the
        scorer phases run their batches on the way), and return its lease once it opens."""
        barrier = self.barrier_future(wait_for, group, timeout_s)
        try:
            self.advance_phase(group=group, to=to)
        except BaseException:
            barrier.cancel()
            raise
        return barrier.result(timeout=timeout_s + 60)

    # ---- deferred batches ------------------------------------------------------------------------------------

    def wait_batch(self, batch_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> Batch:
        """Blocks until the batch is committed (its outputs written back); a failed batch raises
        ``batch_failed`` with the reason."""
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        while True:
            batch = self.get_batch(batch_id, limit=1).batch
            if batch.state == "failed":
                raise UisError("batch_failed", batch.reason or "batch failed", status=409, details=batch)
            if batch.state == "committed":
                return batch
            if time.monotonic() + delay > deadline:
                raise UisError("batch_timeout", f"batch {batch_id} is {batch.state} after {timeout_s}s", status=0)
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    def batch_results(self, batch_id: str, page_size: int = 500) -> Iterator[BatchSample]:
        """Every sample's output of a committed batch, read page by page (``get_batch``)."""
        after: str | None = None
        while True:
            page = self.get_batch(batch_id, after=after, limit=page_size)
            samples = page.samples or []
            yield from samples
            if page.next_after is None or not samples:
                return
            after = page.next_after
