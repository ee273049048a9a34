"""The test session starts one real ``uis demo --no-driver`` (sglang-sim engines, the whole gateway) on a free port
of 127.0.0.1 and stops it at the end."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from uis_client import UisClient

REPO = Path(__file__).resolve().parents[3]
URL_LINE = re.compile(r"console\s+(http://127\.0\.0\.1:\d+)/")


@dataclass(frozen=True)
class Service:
    url: str
    token: str


def start_demo(token: str, timeout_s: float = 180.0) -> tuple[subprocess.Popen[str], str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the tests run against a real `uis demo`")
    # The source CLI when the checkout has one (uis.mjs may run a compiled build that needs `pnpm build` first).
    dev = REPO / "apps/gateway/bin/uis-dev.mjs"
    cli = dev if dev.exists() else REPO / "apps/gateway/bin/uis.mjs"
    proc = subprocess.Popen(
        [node, str(cli), "demo", "--no-driver", "--port", "0", "--host", "127.0.0.1"],
        cwd=REPO,
        env={**os.environ, "UIS_ADMIN_TOKEN": token, "UIS_LOG_LEVEL": "warn"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line == "":
            stop_demo(proc)
            pytest.fail(f"uis demo exited before it served (exit {proc.returncode}): {''.join(seen)[-2000:]}")
        seen.append(line)
        match = URL_LINE.search(line)
        if match:
            return proc, match.group(1)
    stop_demo(proc)
    pytest.fail(f"uis demo printed no URL within {timeout_s}s: {''.join(seen)[-2000:]}")


def stop_demo(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    token = secrets.token_hex(16)
    proc, url = start_demo(token)
    try:
        yield Service(url, token)
    finally:
        stop_demo(proc)


@pytest.fixture()
def client(service: Service) -> Iterator[UisClient]:
    with UisClient(service.url, admin_token=service.token, actor="pytest") as c:
        yield c
