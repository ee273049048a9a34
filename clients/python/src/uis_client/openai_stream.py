"""OpenAI streams (chat or completions) through the gateway, with the weight versions that made their tokens.

    with client.chat_completions_stream("rollout", {"model": "policy", "messages": [...]}) as stream:
        for chunk in stream:
            ...
    stream.spans    # [VersionSpan("v1", 0, 6), VersionSpan("v2", 6, 40)]

The gateway gives every chunk ``system_fingerprint`` (the version that made its tokens) and, when several versions
made the answer, one event ``uis_weight_versions`` after ``data: [DONE]`` with SGLang's spans (or the versions
without an index: SGLang 0.5.2, ``n`` > 1). The OpenAI SDKs stop at ``[DONE]``; this reader reads to the stream's
end (which is the end: no event follows a one-version answer), yields the chunks and keeps the event to itself."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

from .errors import error_from_response
from .rollout import VersionSpan, versions_in_order


class OpenAIStreamVersions:
    """Which output tokens of a streamed OpenAI answer each version made, event by event (``add`` each event's
    data but ``[DONE]``). A chunk's tokens are recorded under its ``system_fingerprint``, counted by
    ``usage.completion_tokens`` when the client asked for ``stream_options.continuous_usage_stats``, else one per
    chunk with text. The gateway's final event replaces them with the engine's spans, or, when it names the versions
    without an index, makes the answer one span of unknown version (None). Several fingerprints without that event
    and without counts are also one unknown span: a count of chunks is no token index. The TypeScript client's
    ``StreamVersionSpans`` reads streams the same way."""

    def __init__(self) -> None:
        self._spans: list[VersionSpan] = []
        self._seen = 0
        self._final: list[VersionSpan] | None = None
        self._uncounted = False

    @property
    def tokens(self) -> int:
        """Output tokens of the first choice so far."""
        return self._seen

    @property
    def spans(self) -> list[VersionSpan]:
        if self._final is not None:
            return list(self._final)
        if self._uncounted and len({s.version for s in self._spans}) > 1:
            return [VersionSpan(None, 0, self._seen)]
        return list(self._spans)

    @property
    def versions(self) -> list[str | None]:
        """The versions that made the answer, in order."""
        return versions_in_order(self.spans)

    def add(self, event: Mapping[str, Any]) -> None:
        choices = event.get("choices")
        if isinstance(choices, list):
            self._chunk(event, choices)
        else:
            self._final_event(event)

    def _chunk(self, chunk: Mapping[str, Any], choices: list[Any]) -> None:
        usage = chunk.get("usage")
        produced = self._seen
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            produced = usage["completion_tokens"]
        elif any(_has_text(c) for c in choices):
            self._uncounted = True
            produced += 1
        if produced > self._seen:
            fingerprint = chunk.get("system_fingerprint")
            version = fingerprint if isinstance(fingerprint, str) else None
            last = self._spans[-1] if self._spans else None
            if last is not None and last.version == version and last.end == self._seen:
                self._spans[-1] = VersionSpan(version, last.start, produced)
            else:
                self._spans.append(VersionSpan(version, self._seen, produced))
            self._seen = produced

    def _final_event(self, event: Mapping[str, Any]) -> None:
        given = event.get("weight_versions")
        if isinstance(given, list) and given and all(_is_span(s) for s in given):
            self._final = [VersionSpan(s["version"], s["start"], s["end"]) for s in given]
        elif isinstance(event.get("uis_weight_versions"), list) and len(event["uis_weight_versions"]) > 1:
            self._final = [VersionSpan(None, 0, self._seen)]


class _Stream:
    """What the sync and async streams share: each event's data read into ``versions``, the chunks passed on."""

    def __init__(self) -> None:
        self.versions = OpenAIStreamVersions()
        self._data: list[str] = []

    @property
    def spans(self) -> list[VersionSpan]:
        return self.versions.spans

    def _line(self, line: str) -> list[dict[str, Any]]:
        """The chunks an SSE line completes (an event ends at an empty line)."""
        if line.startswith("data:"):
            self._data.append(line[6:] if line.startswith("data: ") else line[5:])
            return []
        return self._event() if line == "" else []

    def _event(self) -> list[dict[str, Any]]:
        data, self._data = "\n".join(self._data), []
        if data in ("", "[DONE]"):
            return []
        event = json.loads(data)
        self.versions.add(event)
        # Every chunk (an error event too) but the gateway's versions event, which is this reader's.
        if "choices" in event or not ("weight_versions" in event or "uis_weight_versions" in event):
            return [event]
        return []


class OpenAIStream(_Stream):
    """The chunks of one streamed OpenAI answer through the gateway (an error answer raises before the first);
    ``spans`` once read to the end. Close it (or use ``with``) when stopping early."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        if response.status_code >= 400:
            response.read()
            response.close()
            raise error_from_response(response)
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self._response.iter_lines():
                yield from self._line(line)
            yield from self._event()
        finally:
            self._response.close()

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> OpenAIStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncOpenAIStream(_Stream):
    """``OpenAIStream`` for ``AsyncUisClient``: ``async for chunk in stream``, then ``stream.spans``."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self._response = response

    @classmethod
    async def open(cls, response: httpx.Response) -> AsyncOpenAIStream:
        """The stream of an answer; an error answer raises."""
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise error_from_response(response)
        return cls(response)

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for line in self._response.aiter_lines():
                for chunk in self._line(line):
                    yield chunk
            for chunk in self._event():
                yield chunk
        finally:
            await self._response.aclose()

    async def aclose(self) -> None:
        await self._response.aclose()

    async def __aenter__(self) -> AsyncOpenAIStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _has_text(choice: Any) -> bool:
    """A first choice's chunk with output text (chat ``delta.content``, completions ``text``); the role chunk has
    none."""
    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
        return False
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return isinstance(text, str) and text != ""


def _is_span(s: Any) -> bool:
    return (
        isinstance(s, dict)
        and isinstance(s.get("version"), str)
        and isinstance(s.get("start"), int)
        and isinstance(s.get("end"), int)
    )
