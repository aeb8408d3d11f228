"""OpenAI-compatible request parsing and response shapes (with vLLM's extensions).

What the arena sends: chat messages, `tools` with `tool_choice: "none"`, the sampling fields
(`temperature`, `top_p`, `top_k`, `seed`, `max_tokens`), `stream` with
`stream_options.include_usage`, and for the gates vLLM's `prompt_logprobs`,
`add_generation_prompt`, `continue_final_message` and `chat_template_kwargs`; for LowBArena's
workloads, whose every request must generate exactly max_tokens, vLLM's `ignore_eos` (EOS does
not end the answer) and `min_tokens` (EOS cannot be sampled before that many tokens).
Unsupported options are refused with a 400 and a message, never ignored silently.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from speculator_arena.engine.sampling import SamplingParams
from speculator_arena.errors import ArenaError


class BadRequest(ValueError, ArenaError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class ChatRequest:
    prompt_ids: list[int]
    params: SamplingParams
    max_tokens: int
    seed: int | None
    stream: bool
    include_usage: bool
    stop: list[str]
    prompt_logprobs: int | None
    model: str
    ignore_eos: bool = False
    min_tokens: int = 0


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                raise BadRequest("only text content parts are supported")
        return "".join(parts)
    raise BadRequest(f"message content must be a string or a list of text parts, got {type(content).__name__}")


def _number(body, name, default, kind=float, lo=None, hi=None):
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"{name} must be a number")
    value = kind(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise BadRequest(f"{name}={value} is out of range [{lo}, {hi}]")
    return value


def parse_chat_request(body: dict, tokenizer, max_model_len: int, served_names: list[str]) -> ChatRequest:
    """`served_names[0]` is SERVED_NAME (the default); the TARGET path is accepted too, as vLLM does."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model") or served_names[0]
    if model not in served_names:
        raise BadRequest(f"the model {model!r} does not exist; this engine serves {served_names[0]!r}", 404)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    msgs = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest("every message needs a role")
        if m.get("tool_calls"):
            raise BadRequest("assistant tool_calls are not supported by the development engine")
        msgs.append({"role": str(m["role"]), "content": _text(m.get("content"))})
    if int(body.get("n") or 1) != 1:
        raise BadRequest("n must be 1")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise BadRequest("logprobs of sampled tokens are not supported; prompt_logprobs is")
    tools = body.get("tools") or None
    tool_choice = body.get("tool_choice")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools must be a list of tool schemas")
    if tool_choice not in (None, "none", "auto"):
        raise BadRequest('tool_choice must be "none" (tools are rendered into the prompt; no tool calls are parsed)')
    add_gen = body.get("add_generation_prompt", True)
    cont = bool(body.get("continue_final_message", False))
    if cont and add_gen:
        raise BadRequest("continue_final_message and add_generation_prompt cannot both be true")
    if cont and msgs[-1]["role"] != "assistant":
        raise BadRequest("continue_final_message needs an assistant message last")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRequest("chat_template_kwargs must be an object")
    try:
        text = tokenizer.apply_chat_template(
            msgs,
            tools=tools,
            add_generation_prompt=bool(add_gen),
            continue_final_message=cont,
            tokenize=False,
            **kwargs,
        )
    except Exception as exc:
        raise BadRequest(f"the chat template could not render these messages: {exc}") from exc
    prompt_ids = tokenizer.encode(text, add_special_tokens=False)
    if not prompt_ids:
        raise BadRequest("the rendered prompt is empty")
    if len(prompt_ids) >= max_model_len:
        raise BadRequest(
            f"This model's maximum context length is {max_model_len} tokens; the prompt has {len(prompt_ids)} tokens"
        )
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = max_model_len - len(prompt_ids)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer")
    temperature = _number(body, "temperature", 1.0, float, 0.0, 100.0)
    top_p = _number(body, "top_p", 1.0, float, 1e-9, 1.0)
    top_k = _number(body, "top_k", 0, int, -1, None)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("seed must be an integer")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else list(stop)
    plp = body.get("prompt_logprobs")
    if plp is not None:
        if isinstance(plp, bool):
            plp = 1 if plp else None
        elif not isinstance(plp, int) or plp < 0 or plp > 20:
            raise BadRequest("prompt_logprobs must be an integer in [0, 20]")
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise BadRequest("ignore_eos must be a boolean")
    min_tokens = body.get("min_tokens", 0)
    if isinstance(min_tokens, bool) or not isinstance(min_tokens, int) or not 0 <= min_tokens <= max_tokens:
        raise BadRequest(f"min_tokens must be an integer in [0, max_tokens={max_tokens}]")
    opts = body.get("stream_options") or {}
    return ChatRequest(
        prompt_ids=list(prompt_ids),
        params=SamplingParams(temperature=temperature, top_p=top_p, top_k=max(0, top_k)),
        max_tokens=int(max_tokens),
        seed=seed,
        stream=bool(body.get("stream", False)),
        include_usage=bool(opts.get("include_usage", False)),
        stop=[str(s) for s in stop if s],
        prompt_logprobs=plp,
        model=model,
        ignore_eos=ignore_eos,
        min_tokens=int(min_tokens),
    )


def usage(prompt: int, completion: int, cached: int) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chunk(rid: str, model: str, created: int, delta: dict, finish_reason=None, usage_obj=None) -> dict:
    out = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage_obj is not None:
        out["usage"] = usage_obj
    return out


def usage_chunk(rid: str, model: str, created: int, usage_obj: dict) -> dict:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_obj,
    }


def completion(rid: str, model: str, text: str, finish_reason: str, usage_obj: dict, prompt_logprobs=None) -> dict:
    out = {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        ],
        "usage": usage_obj,
    }
    if prompt_logprobs is not None:
        out["prompt_logprobs"] = prompt_logprobs
    return out


def prompt_logprobs_json(rows: list[dict], tokenizer) -> list:
    """vLLM's shape: None for the first prompt token, then {token_id: {logprob, rank, decoded_token}}."""
    out: list = [None]
    for row in rows:
        out.append(
            {
                str(tid): {"logprob": lp, "rank": rank, "decoded_token": tokenizer.decode([tid])}
                for tid, (lp, rank) in row.items()
            }
        )
    return out


def error_body(message: str, status: int) -> bytes:
    kind = "NotFoundError" if status == 404 else "BadRequestError" if status < 500 else "InternalServerError"
    return json.dumps(
        {
            "error": {"message": message, "type": kind, "param": None, "code": status},
            "object": "error",
            "message": message,
            "type": kind,
            "code": status,
        }
    ).encode()
