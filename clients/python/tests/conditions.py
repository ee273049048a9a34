"""Waiting on a condition, the Python twin of the TypeScript tests' ``waitFor``."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], bool], timeout_s: float = 60.0, what: str = "condition") -> None:
    """Polls ``check`` until it holds; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)
