"""Partial rollouts: a generation that an abort (``finish_reason`` abort) or a broken stream interrupted is resumed,
typically on new weights, with its prompt and the output so far as input and the rest of its token budget; the
finished sample records which output tokens each weight version produced, so a trainer can mask or weight them.

    sample = Sample(prompt_ids, {"max_new_tokens": 256})
    uis.generate_sample("rollout", sample)                 # aborted by a weight switch: sample.interrupted
    uis.resume("rollout", sample, min_weight_version="v2")   # the rest of the budget, on v2
    sample.spans          # [VersionSpan("v1", 0, 37), VersionSpan("v2", 37, 256)]
    sample.mask("v2")     # per output token: produced by v2

An attempt is one SGLang ``/generate`` call (``input_ids``, ``sampling_params``, ``rid``); its answer's
``meta_info.weight_versions`` spans are used when the engine reports them (SGLang >= 0.5.19: a request that spanned
an in-place weight switch has one span per version, split at the output token where the version changed), else its
``meta_info.weight_version``; an attempt that ran on several versions without spans (``uis_weight_versions`` from
the gateway) is recorded with an unknown version (None) rather than a wrong one."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: SGLang's ``max_new_tokens`` when ``sampling_params`` has none.
DEFAULT_MAX_NEW_TOKENS = 128


@dataclass(frozen=True)
class VersionSpan:
    """Output tokens ``[start, end)`` of a sample were produced by weight ``version`` (None: not reported)."""

    version: str | None
    start: int
    end: int


def versions_in_order(spans: list[VersionSpan]) -> list[str | None]:
    """The versions of ``spans``, in order, each once per run."""
    out: list[str | None] = []
    for s in spans:
        if not out or out[-1] != s.version:
            out.append(s.version)
    return out


def _new_rid() -> str:
    return f"rollout-{uuid.uuid4().hex}"


@dataclass
class Sample:
    """One rollout sample across its attempts. ``rid`` stays the same for every attempt (one is in flight at a
    time), so ``abort(rid)`` reaches whichever attempt runs."""

    prompt_ids: list[int]
    sampling_params: dict[str, Any] = field(default_factory=dict)
    rid: str = field(default_factory=_new_rid)
    #: The model (``model`` of the request) when the role serves several.
    model: str | None = None
    output_ids: list[int] = field(default_factory=list)
    text: str = ""
    spans: list[VersionSpan] = field(default_factory=list)
    #: The last attempt's ``finish_reason`` (None: no answer yet, or a stream cut before its end).
    finish_reason: dict[str, Any] | None = None
    #: Attempts whose answer (or part of a stream) was absorbed.
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("a sample needs prompt token ids (prompt_ids): a resumed attempt sends them again")

    @property
    def max_new_tokens(self) -> int:
        return int(self.sampling_params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))

    @property
    def remaining(self) -> int:
        """Output tokens the budget still allows."""
        return max(0, self.max_new_tokens - len(self.output_ids))

    @property
    def aborted(self) -> bool:
        return (self.finish_reason or {}).get("type") == "abort"

    @property
    def finished(self) -> bool:
        """Ended by its own rule (a stop, the length) or with the whole budget spent."""
        kind = (self.finish_reason or {}).get("type")
        return kind in ("stop", "length") or (self.attempts > 0 and self.remaining == 0)

    @property
    def interrupted(self) -> bool:
        """Started but not finished: aborted, or its stream cut. ``resume`` it."""
        return self.attempts > 0 and not self.finished

    @property
    def versions(self) -> list[str | None]:
        """The weight versions that produced the output, in order."""
        return versions_in_order(self.spans)

    def version_of(self, index: int) -> str | None:
        """The weight version that produced output token ``index``."""
        for s in self.spans:
            if s.start <= index < s.end:
                return s.version
        raise IndexError(f"output token {index} of {len(self.output_ids)}")

    def mask(self, version: str | None) -> list[bool]:
        """Per output token: whether ``version`` produced it (e.g. to train only on the newest version's tokens)."""
        out = [False] * len(self.output_ids)
        for s in self.spans:
            if s.version == version:
                out[s.start : s.end] = [True] * (s.end - s.start)
        return out

    def request(self) -> dict[str, Any]:
        """The ``/generate`` body of the next attempt: prompt + output so far as input, the rest of the budget
        (``min_new_tokens`` less what was produced)."""
        produced = len(self.output_ids)
        params = {**self.sampling_params, "max_new_tokens": self.remaining}
        if "min_new_tokens" in params:
            params["min_new_tokens"] = max(0, int(params["min_new_tokens"]) - produced)
        body: dict[str, Any] = {
            "input_ids": [*self.prompt_ids, *self.output_ids],
            "sampling_params": params,
            "rid": self.rid,
        }
        if self.model is not None:
            body["model"] = self.model
        return body

    def begin_stream(self) -> tuple[int, int]:
        """Starts a streamed attempt: the output and text lengths its chunks build on (pass to ``absorb``)."""
        self.attempts += 1
        return len(self.output_ids), len(self.text)

    def absorb(self, answer: Mapping[str, Any], *, stream_from: tuple[int, int] | None = None) -> Sample:
        """Adds an attempt's answer (a ``/generate`` answer), or a streamed attempt's latest chunk with
        ``stream_from`` from ``begin_stream`` (a chunk repeats the attempt's output and text so far). A chunk's new
        tokens are recorded under the chunk's ``weight_version`` (the engine's when it sent them: exact with one
        chunk per token, SGLang's default ``--stream-interval 1``), so a stream across an in-place switch is split
        where it changed even when the engine reports no spans; the finished chunk's spans, when given, win."""
        meta = answer.get("meta_info") or {}
        ids = [int(t) for t in answer.get("output_ids") or []]
        text = str(answer.get("text") or "")
        if stream_from is None:
            self.attempts += 1
            base = len(self.output_ids)
            seen = 0
        else:
            base, text_base = stream_from
            seen = min(len(self.output_ids) - base, len(ids))
            del self.output_ids[base:]
            self._truncate_spans(base + seen)
            self.text = self.text[:text_base]
        self.output_ids.extend(ids)
        self.text += text
        given = isinstance(meta.get("weight_versions"), list) and bool(meta.get("weight_versions"))
        if stream_from is None or given:
            self._truncate_spans(base)
            for span in _spans_of(meta, len(ids)):
                self._add_span(span.version, base + span.start, base + span.end)
        else:
            version = meta.get("weight_version")
            self._add_span(None if version is None else str(version), base + seen, base + len(ids))
        self.finish_reason = meta.get("finish_reason")
        return self

    def _truncate_spans(self, end: int) -> None:
        kept = [s for s in self.spans if s.start < end]
        self.spans = [VersionSpan(s.version, s.start, min(s.end, end)) for s in kept]

    def _add_span(self, version: str | None, start: int, end: int) -> None:
        if end <= start:
            return
        last = self.spans[-1] if self.spans else None
        if last is not None and last.version == version and last.end == start:
            self.spans[-1] = VersionSpan(version, last.start, end)
        else:
            self.spans.append(VersionSpan(version, start, end))


def _spans_of(meta: Mapping[str, Any], produced: int) -> list[VersionSpan]:
    """An attempt's spans: SGLang's ``weight_versions`` (releases from 0.5.19 report them on every finished answer,
    the uis gateway passes them on) when given; else, when the gateway says the attempt ran on several versions
    without saying where they changed (``uis_weight_versions``: an older release across an in-place switch), one
    span of unknown version (None: mask or drop it); else one span of ``weight_version``."""
    given = meta.get("weight_versions")
    if isinstance(given, list) and given:
        spans = [VersionSpan(s.get("version"), int(s.get("start", 0)), int(s.get("end", produced))) for s in given]
        return [VersionSpan(s.version, s.start, min(s.end, produced)) for s in spans]
    unsplit = meta.get("uis_weight_versions")
    if isinstance(unsplit, list) and len(unsplit) > 1:
        return [VersionSpan(None, 0, produced)]
    version = meta.get("weight_version")
    return [VersionSpan(None if version is None else str(version), 0, produced)]


def min_version_headers(min_weight_version: str | None) -> dict[str, str]:
    """The gateway's (and the direct client's) bound on the replica's weight version."""
    return {} if min_weight_version is None else {"X-Min-Weight-Version": min_weight_version}
