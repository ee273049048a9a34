"""One colocated RL step driven from Python against a running uis (e.g. `uis demo --no-driver`):
wait for rollout, generate through direct routing, queue GenRM + teacher batches, advance the phases while the
trainer waits at its barrier, update the policy's weights, release the barrier, read scores and logprobs back.

    python examples/python/rl_step.py http://127.0.0.1:8080 <admin token>
"""

import sys
from typing import Any

from uis_client import UisClient, genrm_sample, teacher_sample


def rl_step(url: str, token: str, step: int = 1) -> dict[str, Any]:
    with UisClient(url, admin_token=token, actor="rl_step.py") as uis, uis.direct("rollout") as rollout:
        uis.wait_barrier("rollout", group="actor")
        prompts = ["What is 17 * 23?", "Reverse a linked list.", "Is 91 prime?"]
        outs = [rollout.generate({"input_ids": [ord(c) for c in p], "sampling_params": {"max_new_tokens": 16}})
                for p in prompts]
        judge = [genrm_sample(f"s{step}-{i}", [{"role": "user", "content": f"{p}\nAnswer: {o['text']}"}])
                 for i, (p, o) in enumerate(zip(prompts, outs))]
        opd = [teacher_sample(f"s{step}-{i}", [ord(c) for c in p], o["output_ids"])
               for i, (p, o) in enumerate(zip(prompts, outs))]
        scores = uis.submit_batch("genrm_score", judge)
        logprobs = uis.submit_batch("teacher_logprobs", opd)
        uis.advance_and_wait("train", group="actor")  # rollout -> genrm_score -> teacher_opd -> train
        uis.update_weights_from_disk("rollout", "policy", "/ckpt/policy", f"step-{step}")
        uis.release_barrier("train", group="actor")  # rollout wakes at the new version
        return {
            "scores": {s.sample_id: s.output for s in uis.batch_results(scores.id)},
            "logprobs": {s.sample_id: s.output for s in uis.batch_results(logprobs.id)},
            "weight_version": uis.engines("rollout").models["policy"].weight_version,
        }


if __name__ == "__main__":
    result = rl_step(sys.argv[1], sys.argv[2])
    print(f"weight_version={result['weight_version']} scores={len(result['scores'])} "
          f"logprobs={len(result['logprobs'])}")
