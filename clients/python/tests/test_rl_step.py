"""The trainer example (``examples/python/rl_step.py``) drives one colocated RL step against the real demo."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from uis_client import UisClient
from uis_client.models import GenrmVerdict, TeacherLogprobs

from .conftest import REPO, Service

EXAMPLE = REPO / "examples" / "python" / "rl_step.py"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("rl_step", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rl_step_example_scores_logprobs_and_new_version(service: Service, client: UisClient) -> None:
    result = _load_example().rl_step(service.url, service.token, step=101)
    scores, logprobs = result["scores"], result["logprobs"]
    assert sorted(scores) == ["s101-0", "s101-1", "s101-2"]
    for output in scores.values():
        assert isinstance(output, GenrmVerdict) and output.response
    assert sorted(logprobs) == ["s101-0", "s101-1", "s101-2"]
    for output in logprobs.values():
        assert isinstance(output, TeacherLogprobs)
        assert len(output.logprobs) == len(output.token_ids) > 0
    assert result["weight_version"] == "step-101"
    # Back in rollout, every replica of the policy serves the new version.
    snap = client.engines("rollout")
    assert snap.phase == "rollout"
    assert {e.weight_version for e in snap.models["policy"].engines} == {"step-101"}


def test_rl_step_example_runs_as_a_script(service: Service) -> None:
    """As CI runs it: a separate Python process, its closing line on stdout."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), service.url, service.token],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "weight_version=step-1 scores=3 logprobs=3" in done.stdout
