#!/usr/bin/env bash
# One-command smoke run on a machine with a GPU and SGLang (the day one is there; CI has neither):
#   1. builds a tiny random Llama locally (transformers config + random weights + a small tokenizer trained here on a
#      built-in text; nothing is fetched), twice with different seeds (the second is the weight update from disk);
#   2. runs the real-SGLang test of the engine package (launch, generate, sleep, wake by tag, update, stop);
#   3. runs `uis serve --launcher local` on a one-GPU colocated defer layout (rollout -> genrm -> train) and drives
#      one cycle with a weight update from disk through the admin API;
#   4. prints a table of timings (start, first token, release by tag + resume at each phase switch, update).
# Without a GPU or an importable sglang it refuses at once, saying why (exit 2). Budget: under 8 minutes on 1 GPU.
#
#   scripts/gpu-smoke.sh            # PYTHON=python3 by default: the interpreter that imports sglang
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

refuse() {
  echo "gpu-smoke: refusing to run: $*" >&2
  exit 2
}

command -v nvidia-smi >/dev/null 2>&1 || refuse "no NVIDIA GPU (nvidia-smi is not installed)"
gpus=$(nvidia-smi -L 2>&1) || refuse "no NVIDIA GPU (nvidia-smi -L: ${gpus//$'\n'/ })"
[ -n "$gpus" ] || refuse "no NVIDIA GPU (nvidia-smi -L lists none)"
command -v "$PY" >/dev/null 2>&1 || refuse "no Python interpreter '$PY' (set PYTHON)"
probe=$("$PY" -c 'import sglang, torch, transformers, tokenizers; print(sglang.__version__)' 2>&1) ||
  refuse "sglang is not importable by $PY (${probe##*$'\n'})"
sglang_version=${probe##*$'\n'}
command -v node >/dev/null 2>&1 || refuse "node is not installed"
[ -d node_modules ] || refuse "dependencies are not installed (run pnpm install --frozen-lockfile)"

work=$(mktemp -d "${TMPDIR:-/tmp}/uis-gpu-smoke.XXXXXX")
uis_pid=""
cleanup() {
  if [ -n "$uis_pid" ] && kill -0 "$uis_pid" 2>/dev/null; then
    kill -TERM "$uis_pid" 2>/dev/null
    wait "$uis_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
timings="$work/timings.tsv"
: >"$timings"
now() { date +%s.%N; }
record() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%s\t%.1f\n", n, b - a }' >>"$timings"; }

echo "gpu-smoke: SGLang $sglang_version, ${gpus%%$'\n'*}"
echo "gpu-smoke: building a tiny random model in $work (nothing is downloaded)"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" - "$work" <<'PY' || { echo "gpu-smoke: model build failed" >&2; exit 1; }
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
text = (
    "the quick brown fox jumps over the lazy dog . a policy samples tokens , a judge scores them , "
    "a teacher gives log probabilities and the trainer updates the weights . hello world ! 0 1 2 3 4 5 6 7 8 9"
).split(" . ")
special = ["<unk>", "<s>", "</s>", "<pad>"]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.train_from_iterator(text * 50, trainers.BpeTrainer(vocab_size=512, special_tokens=special,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                               pad_token="<pad>")
fast.chat_template = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                     bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                     torch_dtype="bfloat16")
for name, seed in (("model-a", 1), ("model-b", 2)):
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out / name, safe_serialization=True)
    fast.save_pretrained(out / name)
print(f"gpu-smoke: tiny model: vocab {len(fast)}, {sum(p.numel() for p in model.parameters())} parameters")
PY
model_a="$work/model-a"
model_b="$work/model-b"

# The local launcher runs `python -m sglang.launch_server`: the interpreter that imports sglang comes first.
mkdir -p "$work/bin"
ln -s "$(command -v "$PY")" "$work/bin/python"
export PATH="$work/bin:$PATH"

echo "gpu-smoke: real-SGLang test of the engine package"
t0=$(now)
UIS_PYTHON=python UIS_SGLANG_TEST_MODEL="$model_a" npx vitest run --project sglang-engine src/real-sglang.test.ts ||
  { echo "gpu-smoke: the real-SGLang test failed" >&2; exit 1; }
record "real-SGLang test (launch, generate, sleep, wake by tag, update, stop)" "$t0" "$(now)"

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token="gpu-smoke-$RANDOM$RANDOM"
cat >"$work/defer.yaml" <<YAML
# One GPU, time-shared: rollout, then GenRM scoring, then training (the engines release memory by tag between).
cluster:
  nodes:
    - { name: node-0, gpus: 1 }
training:
  actor_gpus: 1
  offload_train: true
roles:
  rollout:
    deployment: { mode: colocated_split, offload: true }
    routing: { default_model: policy }
    models:
      - name: policy
        model_path: $model_a
        weight_source: disk
        sglang_version: "$sglang_version"
        engine_groups:
          - { num_gpus: 1, gpus_per_engine: 1, server_args: { mem_fraction_static: 0.3 } }
  genrm:
    deployment: { mode: colocated_defer, offload: true }
    routing: { default_model: judge }
    models:
      - name: judge
        model_path: $model_a
        weight_source: static
        sglang_version: "$sglang_version"
        engine_groups:
          - { num_gpus: 1, gpus_per_engine: 1, server_args: { mem_fraction_static: 0.3 } }
schedule:
  activation_groups:
    - name: actor
      phases:
        - { name: rollout, residents: [rollout] }
        - { name: genrm_score, residents: [genrm] }
        - { name: train, residents: [train] }
YAML

echo "gpu-smoke: uis serve --launcher local on $work/defer.yaml"
t0=$(now)
UIS_ADMIN_TOKEN="$token" node apps/gateway/bin/uis-dev.mjs serve --config "$work/defer.yaml" --launcher local \
  --port "$port" --start-deadline 300 >"$work/uis.log" 2>&1 &
uis_pid=$!

UIS_URL="http://127.0.0.1:$port" UIS_TOKEN="$token" MODEL_B="$model_b" T0="$t0" TIMINGS="$timings" \
  "$PY" - <<'PY'
"""Drives one defer cycle through the admin API and appends a row per step to the timings file."""
import json
import os
import time
import urllib.error
import urllib.request

URL, TOKEN = os.environ["UIS_URL"], os.environ["UIS_TOKEN"]
T0 = float(os.environ["T0"])


def call(method, path, body=None, timeout=600):
    req = urllib.request.Request(URL + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as res:
        return json.loads(res.read() or b"null")


def row(name, start, end=None):
    with open(os.environ["TIMINGS"], "a") as f:
        f.write(f"{name}\t{(end or time.time()) - start:.1f}\n")


def wait(what, check, limit=420):
    start = time.time()
    while time.time() - start < limit:
        try:
            if check():
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(1)
    raise SystemExit(f"gpu-smoke: gave up waiting for {what}")


def first_token(label):
    start = time.time()
    body = {"text": "hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}, "stream": True}
    req = urllib.request.Request(URL + "/rollout/generate", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as res:
        for line in res:
            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                row(label, start)
                break
        res.read()


def lease():
    return call("GET", "/admin/phases")["leases"][0]


def replicas():
    return [r for role in call("GET", "/admin/roles")["roles"] for m in role["models"].values() for r in m["replicas"]]


def policy_ready():
    policy = [r for r in replicas() if r["engine_id"].startswith("policy/")]
    return policy and all(r["state"] == "ready" for r in policy) and lease()["status"] == "held"


wait("the rollout engines", policy_ready)
row("uis start: config to ready engines (sglang launch + load)", T0)
versions = {r["engine_id"]: r.get("sglang_version") for r in replicas()}
print(f"gpu-smoke: engines report SGLang versions {versions}")
first_token("first token (rollout)")

start = time.time()
call("POST", "/admin/phases/advance", {"to": "genrm_score"})
wait("genrm_score resident", lambda: lease()["phase"] == "genrm_score" and lease()["status"] == "held")
row("switch rollout -> genrm: release rollout by tag, resume genrm", start)

start = time.time()
call("POST", "/admin/phases/advance", {"to": "train"})
wait("train resident", lambda: lease()["phase"] == "train" and lease()["status"] == "held")
row("switch genrm -> train: release genrm", start)

start = time.time()
call("POST", "/admin/roles/rollout/models/policy/weights",
     {"source": "disk", "model_path": os.environ["MODEL_B"], "weight_version": "smoke-2"})
row("weight update from disk (queued while asleep)", start)

start = time.time()
call("POST", "/admin/barriers/release", {"phase": "train"})
wait("rollout resident", lambda: lease()["phase"] == "rollout" and lease()["status"] == "held")
row("switch train -> rollout: resume weights, load from disk, resume kv_cache", start)
replicas = call("GET", "/admin/roles/rollout/models/policy/replicas")
assert replicas["weight_version"] == "smoke-2", replicas
first_token("first token after the update")
PY
status=$?
kill -TERM "$uis_pid" 2>/dev/null
wait "$uis_pid" 2>/dev/null
uis_pid=""
if [ "$status" -ne 0 ]; then
  echo "gpu-smoke: the defer cycle failed; uis log tail:" >&2
  tail -n 40 "$work/uis.log" >&2
  exit 1
fi

echo
printf '%-80s %8s\n' "step" "seconds"
while IFS=$'\t' read -r name secs; do printf '%-80s %8s\n' "$name" "$secs"; done <"$timings"
echo "gpu-smoke: passed"
