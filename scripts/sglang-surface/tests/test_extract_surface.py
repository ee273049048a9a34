"""The surface extractor on a miniature SGLang source tree (tests/fixture) that has each construct the real wheels
use: argparse calls, dataclass-derived flags (0.5.15+), namespace field classes (0.5.23+), routes, request classes."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import answers  # noqa: E402
import extract_surface  # noqa: E402

FIXTURE = HERE / "fixture"


@pytest.fixture(scope="module")
def surface() -> dict[str, Any]:
    return extract_surface.extract(FIXTURE)


def flag(surface: dict[str, Any], name: str) -> dict[str, Any]:
    for f in surface["flags"].values():
        if name in f["names"]:
            return f
    raise AssertionError(f"{name} not in the surface")


def test_version_comes_from_version_py(surface: dict[str, Any]) -> None:
    assert surface["sglang_version"] == "9.9.9.fixture"


def test_argparse_flags_keep_names_arity_type_choices_and_defaults(surface: dict[str, Any]) -> None:
    tp = flag(surface, "--tensor-parallel-size")
    assert tp["names"] == ["--tp-size", "--tensor-parallel-size"]
    assert (tp["arity"], tp["type"], tp["default"]) == ([1, 1], "int", 2)  # default=ServerArgs.tp_size resolved
    assert flag(surface, "--disaggregation-mode")["choices"] == ["null", "prefill", "decode"]
    # Choices imported from another module, through list(d.keys()).
    assert flag(surface, "--load-format")["choices"] == ["auto", "pt"]
    # A helper that receives the parser registers flags too.
    assert flag(surface, "--skip-server-warmup")["arity"] == [0, 0]
    assert flag(surface, "--nargs-flag")["arity"] == [0, None]


def test_a_computed_value_is_stated_as_source_not_guessed(surface: dict[str, Any]) -> None:
    parser = flag(surface, "--parser")
    assert "choices" not in parser
    assert parser["choices_source"] == "dynamic_choices()"


def test_dataclass_fields_become_flags_as_sglang_derives_them(surface: dict[str, Any]) -> None:
    assert flag(surface, "--enable-memory-saver")["action"] == "store_true"
    kv = flag(surface, "--kv-dtype")
    assert (kv["choices"], kv["type"], kv["default"]) == (["auto", "fp8"], "str", "auto")  # Literal -> choices
    lora = flag(surface, "--lora-paths")
    assert (lora["nargs"], lora["arity"]) == ("+", [1, None])  # List[str] -> nargs "+"
    model = flag(surface, "--model")
    assert model["names"] == ["--model-path", "--model"] and model["required"] is True
    renamed = flag(surface, "--new-name")
    assert renamed["dest"] == "renamed" and renamed["default"] == 3
    old = flag(surface, "--old-flag")
    assert old["deprecated"] is True and old["arity"] == [0, 0]


def test_fields_without_cli_metadata_or_marked_no_cli_are_not_flags(surface: dict[str, Any]) -> None:
    names = {n for f in surface["flags"].values() for n in f["names"]}
    assert "--secret" not in names  # Arg(no_cli=True)
    assert "--plain" not in names  # no A[...] annotation
    assert "--not-a-flag" not in names  # a class without _NS_PATH


def test_namespace_field_classes_contribute_flags(surface: dict[str, Any]) -> None:
    assert flag(surface, "--pipeline-parallel-size")["names"] == ["--pp-size", "--pipeline-parallel-size"]
    assert flag(surface, "--attn-dp-size")["default"] == 1


def route(surface: dict[str, Any], path: str) -> dict[str, Any]:
    found = [r for r in surface["routes"] if r.get("path") == path]
    assert len(found) == 1, path
    return found[0]


def test_routes_have_their_methods_bodies_and_answer_keys(surface: dict[str, Any]) -> None:
    assert route(surface, "/generate")["methods"] == ["POST", "PUT"]
    assert route(surface, "/flush_cache")["methods"] == ["GET", "POST"]
    assert route(surface, "/health_generate")["methods"] == ["GET"]  # stacked decorators
    disk = route(surface, "/update_weights_from_disk")
    assert disk["body"] == "UpdateWeightFromDiskReqInput"
    assert disk["answer_keys"] == ["message", "num_paused_requests", "success"]
    # A deprecated alias that delegates answers what its target answers.
    assert route(surface, "/get_model_info")["answer_keys"] == ["is_generation", "model_path", "weight_version"]
    # os.environ.get(NAME, default) routes are listed under their default path.
    assert route(surface, "/vertex_generate")["methods"] == ["POST"]


def test_answer_keys_come_from_returned_dicts_only(surface: dict[str, Any]) -> None:
    info = route(surface, "/model_info")
    assert info["answer_keys"] == ["is_generation", "model_path", "weight_version"]  # not the 400 error body
    assert "answer_open" not in info
    server = route(surface, "/server_info")
    assert server["answer_keys"] == ["version"] and server["answer_open"] is True  # **spread: more keys
    assert route(surface, "/get_load")["answer_keys"] == ["dp_rank", "num_reqs"]  # a list of dicts
    assert "answer_keys" not in route(surface, "/generate")  # built elsewhere: the surface does not say


def test_included_routers_keep_their_prefix_and_query_params_are_not_bodies(surface: dict[str, Any]) -> None:
    loads = route(surface, "/v1/loads")
    assert loads["methods"] == ["GET"]
    assert "body" not in loads  # dp_rank: Optional[int] is a query parameter


def test_a_computed_route_path_is_listed_with_its_source(surface: dict[str, Any]) -> None:
    assert {"path_source": "some_dynamic_path()", "methods": ["GET"], "handler": "unknown"} in surface["routes"]


def test_classes_have_inherited_fields_defaults_and_required(surface: dict[str, Any]) -> None:
    classes = surface["classes"]
    assert "NotOfInterest" not in classes
    pause = classes["PauseGenerationReqInput"]["fields"]
    assert list(pause) == ["rid", "mode"]  # BaseReq's rid first
    assert pause["mode"] == {"type": "Literal['abort', 'retract', 'in_place']", "default": "abort"}
    disk = classes["UpdateWeightFromDiskReqInput"]["fields"]
    assert disk["model_path"]["required"] is True
    assert "default" not in disk["tags"] and "required" not in disk["tags"]  # default_factory
    chat = classes["ChatCompletionRequest"]["fields"]
    assert chat["model"]["required"] is True  # Field(...)
    assert chat["top_k"]["default"] == -1
    assert "counter" not in classes["ModelCard"]["fields"]  # ClassVar


def test_memory_tags_are_the_gpu_memory_type_constants(surface: dict[str, Any]) -> None:
    assert surface["memory_tags"] == ["kv_cache", "weights"]


def wheel_of(tmp_path: Path, with_version_py: bool) -> Path:
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for file in FIXTURE.rglob("*.py"):
            name = str(file.relative_to(FIXTURE))
            if name == "sglang/version.py" and not with_version_py:
                continue
            z.write(file, name)
        z.writestr("sglang-9.9.9.dist-info/METADATA", "Metadata-Version: 2.4\nName: sglang\nVersion: 9.9.9\n")
    return wheel


def test_reads_a_wheel_and_writes_one_line_per_entry(tmp_path: Path) -> None:
    out = tmp_path / "surface.json"
    assert extract_surface.main([str(wheel_of(tmp_path, True)), "-o", str(out)]) == 0
    text = out.read_text()
    written = json.loads(text)
    assert written == extract_surface.extract(FIXTURE)
    tp_lines = [line for line in text.splitlines() if line.startswith('  "--tp-size"')]
    assert len(tp_lines) == 1 and '"default": 2' in tp_lines[0]


def test_version_falls_back_to_the_wheel_metadata(tmp_path: Path) -> None:
    assert extract_surface.extract(wheel_of(tmp_path, False))["sglang_version"] == "9.9.9"


def test_a_missing_source_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert extract_surface.main([str(tmp_path / "nope.whl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_tree_without_server_args_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "version.py").write_text('__version__ = "1"\n')
    with pytest.raises(SystemExit, match="server_args.py not found"):
        extract_surface.extract(tmp_path)


def test_generate_answer_keys_come_with_the_conditions_that_set_them(surface: dict[str, Any]) -> None:
    meta = surface["answers"]["generate.meta_info"]
    assert meta["source"] == "sglang/srt/managers/tokenizer_manager.py:_handle_batch_output"
    fields = meta["fields"]
    assert fields["id"] == [[]] and fields["finish_reason"] == [[]]  # the literal that creates meta_info
    assert fields["completion_tokens"] == [["not isinstance(recv_obj, BatchEmbeddingOutput)"]]  # update({...})
    assert fields["e2e_latency"] == [["state.finished"]]  # meta_info["k"] = ...
    # Helpers handed meta_info: a method (by its own parameter name) and a function imported from sglang.
    assert fields["output_token_logprobs"] == [["getattr(state.obj, 'return_logprob', False)", "via convert_logprob_style"]]
    assert fields["weight_versions"][0][-2:] == ["via add_versions", "recv_obj.weight_versions"]
    # An update from a call the source does not spell out is named, not guessed.
    assert meta["open_sources"] == ["recv_obj.time_stats.convert()"]
    text = surface["answers"]["generate"]["fields"]["text"]
    assert ["isinstance(recv_obj, BatchStrOutput)", "is_stream", "= None"] in text  # a placeholder filled later
    assert ["isinstance(recv_obj, BatchStrOutput)", "not (is_stream)"] in text


def test_load_entries_come_from_the_class_or_method_that_builds_them(surface: dict[str, Any]) -> None:
    loads = surface["answers"]["v1/loads.loads[]"]
    assert loads["source"].endswith("load_snapshot.py:LoadSnapshot.to_dict")
    # The class's fields less the section fields, a section only on request, a key the handler adds.
    assert loads["fields"]["num_total_tokens"] == [[]] and loads["fields"]["num_total_reqs"] == [[]]
    assert loads["fields"]["memory"] == [["include sections", "include is not None"]]
    source = extract_surface.Source(FIXTURE)
    handler = ast.parse("async def get_load():\n    return await tokenizer_manager.get_load()\n").body[0]
    total = answers.get_load_answer(source, handler, extract_surface._locate_class)
    assert total == {"source": "sglang/srt/managers/tokenizer_manager.py:get_load", "fields": {"load": [[]]}}


def test_server_info_spreads_the_server_args_fields_not_the_argparse_dests(surface: dict[str, Any]) -> None:
    fields = surface["answers"]["server_info.ServerArgs"]["fields"]
    assert {"tp_size", "model_path", "weight_version", "attn_dp_size"} <= set(fields)


def test_a_handler_that_only_raises_is_marked_with_its_status(surface: dict[str, Any]) -> None:
    gone = next(r for r in surface["routes"] if r.get("path") == "/weight_version")
    assert gone["always_status"] == 404 and "answer_keys" not in gone
    # `status_code=200 if success else 400` answers the same dict either way: its keys are the route's answer.
    destroy = next(r for r in surface["routes"] if r.get("path") == "/destroy_weights_update_group")
    assert destroy["answer_keys"] == ["message", "success"]


def test_the_drift_check_says_when_the_package_index_cannot_be_reached(tmp_path: Path) -> None:
    """CI counts exit 3 as skipped (nothing was compared), anything else but 0 as failed."""
    env = {
        **os.environ,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # nothing listens on the discard port
        "PIP_FIND_LINKS": str(tmp_path),
        "PIP_RETRIES": "1",
        "PIP_TIMEOUT": "5",
    }
    out = subprocess.run(
        ["node", str(HERE.parent / "surface.mjs"), "--check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 3, out.stderr
    assert "cannot reach the package index for sglang==" in out.stderr
