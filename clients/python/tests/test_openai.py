"""The official openai Python client through ``client.openai(role)`` and the root ``/v1`` routes of the real demo:
plain and streaming chat and completions, the model list, OpenAI's error shape."""

from __future__ import annotations

import openai
import pytest

from uis_client import UisClient

HI: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("role", ["rollout", None], ids=["per-role", "root"])
def test_chat_and_completions_plain_and_streaming(client: UisClient, role: str | None) -> None:
    oa = client.openai(role, max_retries=0)
    chat = oa.chat.completions.create(model="actor", messages=HI, max_tokens=6)
    assert chat.model == "policy" and chat.choices[0].message.content
    text = "".join(
        c.choices[0].delta.content or ""
        for c in oa.chat.completions.create(model="policy", messages=HI, max_tokens=6, stream=True)
        if c.choices
    )
    assert text
    # ignore_eos (SGLang's extension): the answer is exactly max_tokens long, whatever the simulated text.
    done = oa.completions.create(model="policy-code", prompt="def f():", max_tokens=5, extra_body={"ignore_eos": True})
    assert done.object == "text_completion" and done.usage is not None and done.usage.completion_tokens == 5
    pieces = [c.choices[0].text for c in oa.completions.create(model="actor", prompt="x", max_tokens=7, stream=True) if c.choices]
    assert len(pieces) > 1 and "".join(pieces)


def test_root_models_list_every_role(client: UisClient) -> None:
    listed = {(getattr(m, "role", None), m.id) for m in client.openai().models.list().data}
    assert {("rollout", "policy"), ("rollout", "actor"), ("genrm", "judge"), ("teacher", "math-teacher")} <= listed


def test_openai_errors_keep_code_path_and_retry_guidance(client: UisClient) -> None:
    oa = client.openai(max_retries=0)
    with pytest.raises(openai.NotFoundError) as unknown:
        oa.chat.completions.create(model="gpt-9", messages=HI)
    body = unknown.value.body
    assert isinstance(body, dict)
    assert (body["code"], body["param"], body["path"], body["type"]) == (
        "unknown_model",
        "model",
        "body.model",
        "invalid_request_error",
    )
    # GenRM sleeps outside its phase: 503 with the reason, never woken by the request.
    with pytest.raises(openai.InternalServerError) as asleep:
        oa.chat.completions.create(model="judge", messages=HI)
    assert asleep.value.status_code == 503
    assert asleep.value.response.headers["retry-after"] == "30"
    assert isinstance(asleep.value.body, dict) and asleep.value.body["code"] == "model_not_ready"
