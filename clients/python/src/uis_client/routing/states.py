"""Retry guidance per model state, as ``retryGuidance`` of ``packages/spec/src/states.ts``."""

from __future__ import annotations

_GUIDANCE: dict[str, tuple[int, str]] = {
    "sleeping": (30, "model is sleeping: its GPUs belong to another phase; it is not woken by requests"),
    "draining": (10, "model is draining: it finishes in-flight work and accepts nothing new"),
    "onloading": (5, "model is onloading: weights and KV cache are being restored"),
    "starting": (5, "model is starting: engines are launching"),
    "dead": (15, "model has no live replica: engines are dead or being recovered"),
    "ready": (1, "model is ready"),
}


def retry_guidance(state: str, held: bool = False) -> tuple[int, str]:
    """(seconds to wait, why). ``held``: an operator drained the model; no phase change brings it back."""
    if held and state not in ("ready", "dead"):
        return 30, f"model is {state}: an operator drained it; it serves again once an operator activates it"
    return _GUIDANCE[state]
