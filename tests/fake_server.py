"""A fake OpenAI-compatible server on 127.0.0.1 (``http.server`` in a thread, see ``local_http``) that answers
with hand-written OpenAI/vLLM-shaped bodies from the tiny model's tokenizer and injects faults, and the job specs
and ``server`` backend that talk to it. The fixtures ``hf`` and ``fakes`` (conftest.py) build on it."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from generation_job import spec_data
from local_http import LocalHTTP
from tiny_model import VOCAB

EOS = 2  # <|im_end|> in tiny_model.SPECIALS order
#: ids of single characters (filled by the ``hf`` fixture): their text re-encodes to at most as many ids
ALPHABET: list[int] = []


def load_hf(tiny: Path):
    """The tiny model's transformers tokenizer; fills :data:`ALPHABET` (what the ``hf`` fixture returns)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    ALPHABET[:] = tok.convert_tokens_to_ids(list("abcdefghijklmnopqrstuvwxyz0123456789"))
    assert len(set(ALPHABET)) == 36 and tok.unk_token_id not in ALPHABET
    return tok


def local_prompt(hf, user: str) -> tuple[str, list[int]]:
    """The chat template applied here with transformers directly (thinking off), as the other backends do."""
    text = hf.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    return text, hf(text, add_special_tokens=False)["input_ids"]


def decode(hf, ids, skip: bool = True) -> str:
    """Text of ids with the fast tokenizer itself (no transformers clean-up of spaces)."""
    return hf.backend_tokenizer.decode(list(ids), skip_special_tokens=skip)


def rule(seed: int, sample: int, cap: int) -> tuple[list[int], str]:
    """The fake server's decode: every third sample stops early on EOS, the others run to the cap."""
    n = cap // 2 if (seed + sample) % 3 == 0 else cap
    ids = [ALPHABET[(seed * 31 + sample * 17 + t * 7) % len(ALPHABET)] for t in range(n)]
    if n < cap:
        ids[-1] = EOS
        return ids, "stop"
    return ids, "length"


def first_length(answer: dict) -> dict:
    """The answer's first choice that ran to the cap (``rule`` gives one in every two consecutive samples)."""
    return next(c for c in answer["choices"] if c["finish_reason"] == "length")


def first_id(answer: dict, value: int) -> None:
    """Replace the first output id of choice 0 with ``value``."""
    answer["choices"][0]["token_ids"][0] = value


#: faults that spoil a well-formed answer (a request for n = 2 under cap 12) and the problem named for each
TAMPER = {
    "index-true": (lambda a: a["choices"].append({**a["choices"][0], "index": True}), "choice 2 has index true"),
    "index-half": (lambda a: a["choices"].append({**a["choices"][0], "index": 0.5}), "choice 2 has index 0.5"),
    "index-str": (lambda a: a["choices"].append({**a["choices"][0], "index": "1"}), 'choice 2 has index "1"'),
    "index-null": (lambda a: a["choices"].append({**a["choices"][0], "index": None}), "choice 2 has index null"),
    "id-2**64": (
        lambda a: first_id(a, 2**64),
        f"choice 0: token id 18446744073709551616 out of range 0..{VOCAB - 1}",
    ),
    "id-vocab": (
        lambda a: first_id(a, VOCAB),
        f"choice 0: token id {VOCAB} out of range 0..{VOCAB - 1}",
    ),
    "short-length": (
        lambda a: first_length(a)["token_ids"].pop(),
        "finish_reason 'length' with 11 of max_tokens 12 tokens",
    ),
    "stop-at-cap": (
        lambda a: first_length(a).update(finish_reason="stop"),
        "finish_reason 'stop' with 12 of max_tokens 12 tokens",
    ),
    "over-cap": (lambda a: first_length(a)["token_ids"].append(EOS), "13 output ids, above max_tokens 12"),
}


def trickle(h, gap_s: float = 0.5) -> None:
    """A 200 whose headers promise 200 bytes and whose body then comes one byte every ``gap_s`` seconds."""
    try:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "200")
        h.end_headers()
        for byte in b'{"choices": [{"inde':
            h.wfile.write(bytes([byte]))
            time.sleep(gap_s)
    except OSError:  # the client gave up
        pass
    h.close_connection = True


# -- the fake server -----------------------------------------------------------------------------------------------


class Fake:
    """An OpenAI-compatible server on 127.0.0.1: ``mode`` is ``ids`` (vLLM >= 0.10.2), ``plain`` (a hosted API:
    text only, vLLM's extensions refused) or ``logprobs`` (older vLLM); ``faults`` are applied to the next
    requests in order."""

    def __init__(self, hf, mode: str = "ids", served: str = "tiny", key: str | None = None) -> None:
        self.hf, self.mode, self.served, self.key = hf, mode, served, key
        self.faults: list[str] = []
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.inflight = self.max_inflight = 0
        self.delay = 0.0
        self.prompt_shift = 0
        self.http = LocalHTTP(self.get, self.post)
        self.url = self.http.url

    def get(self, h) -> None:
        if h.path == "/version":
            h.reply(200, {"version": "0.0.fake"})
        else:
            h.reply(404, {"error": {"message": "Not Found", "type": "NotFoundError", "code": 404}})

    def post(self, h, raw: bytes) -> None:
        body = json.loads(raw)
        with self.lock:
            self.bodies.append(body)
            fault = self.faults.pop(0) if self.faults else None
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            self.serve(h, body, fault)
        finally:
            with self.lock:
                self.inflight -= 1

    def close(self) -> None:
        self.http.close()

    def serve(self, h, body: dict, fault: str | None) -> None:
        if fault == "drop":
            h.close_connection = True
            return
        if fault == "slow":
            time.sleep(1.0)
        if fault == "silent":
            time.sleep(2.5)
        if fault == "trickle":
            return trickle(h)
        if fault == "429":
            return h.reply(429, {"error": {"message": "Too Many Requests", "code": 429}}, {"Retry-After": "1"})
        if fault == "500":
            return h.reply(500, {"error": {"message": "EngineCore died\nTraceback ...", "code": 500}})
        if fault == "400":
            return h.reply(
                400,
                {
                    "error": {
                        "message": "max_tokens is too large",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    }
                },
            )
        if fault == "garbage":
            return h.reply(200, None, raw=b'{"choices": [ {"index": 0,')
        if fault == "nested":  # well-formed JSON, 5,000 levels deep
            return h.reply(200, None, raw=b'{"choices": ' + b"[" * 5000 + b"]" * 5000 + b"}")
        if fault == "nested-500":  # an error whose body nests 5,000 levels deep
            return h.reply(500, None, raw=b'{"error": ' + b"[" * 5000 + b"]" * 5000 + b"}")
        if fault == "long":  # text only, and more of it than the cap allows
            return h.reply(
                200, {"choices": [{"index": i, "text": "x " * 40, "finish_reason": "length"} for i in range(body["n"])]}
            )
        if fault == "abort":
            return h.reply(
                200,
                {
                    "choices": [
                        {"index": i, "text": "", "finish_reason": "abort", "token_ids": []} for i in range(body["n"])
                    ]
                },
            )
        if self.key is not None and h.headers.get("Authorization") != f"Bearer {self.key}":
            return h.reply(401, {"error": "Unauthorized"})
        if body["model"] != self.served:
            return h.reply(
                404,
                {
                    "error": {
                        "message": f"The model `{body['model']}` does not exist.",
                        "type": "NotFoundError",
                        "param": "model",
                        "code": 404,
                    }
                },
            )
        extensions = sorted({"return_token_ids", "top_k"} & set(body))
        if self.mode == "plain" and (extensions or not isinstance(body.get("prompt"), str)):
            bad = extensions or ["prompt"]
            return h.reply(
                400,
                {
                    "error": {
                        "message": f"Unrecognized request argument supplied: {bad[0]}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )
        time.sleep(self.delay)
        answer = self.answer(body, h.path)
        if fault in TAMPER:
            TAMPER[fault][0](answer)
        h.reply(200, answer)

    def answer(self, body: dict, path: str) -> dict:
        chat = path.endswith("/chat/completions")
        if chat:
            prompt_ids = local_prompt(self.hf, body["messages"][0]["content"])[1][self.prompt_shift :]
        elif isinstance(body["prompt"], list):
            prompt_ids = list(body["prompt"])
        else:
            prompt_ids = self.hf(body["prompt"], add_special_tokens=False)["input_ids"]
        choices = []
        for i in range(body["n"]):
            ids, finish = rule(body["seed"], i, body["max_tokens"])
            text = decode(self.hf, ids)
            c = {"index": i, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            c.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            if self.mode == "ids":
                c["token_ids"] = ids
                if not chat:
                    c["prompt_token_ids"] = prompt_ids[self.prompt_shift :]
            elif self.mode == "logprobs" and body.get("return_tokens_as_token_ids"):
                c["logprobs"] = {
                    "tokens": [f"token_id:{t}" for t in ids],
                    "token_logprobs": [-1.0] * len(ids),
                    "text_offset": list(range(len(ids))),
                    "top_logprobs": None,
                }
            choices.append(c)
        out = {
            "id": "cmpl-fake",
            "object": "chat.completion" if chat else "text_completion",
            "created": 1,
            "model": self.served,
            "choices": choices,
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": 1, "total_tokens": 1},
        }
        if chat and self.mode == "ids":
            out["prompt_token_ids"] = prompt_ids
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_spec(tiny, urls, job: dict | None = None, **server) -> dict:
    """The test job (``job`` overrides its keys) with a ``[server]`` table (``server`` overrides its keys)."""
    opts = {"base_url": urls, "model": "tiny", "max_retries": 4, "timeout_s": 10.0}
    opts.update(server)
    return spec_data(tiny, server=opts, **(job or {}))


def server_backend(tiny: Path, spec, **kw):
    """The ``server`` backend of ``spec`` on the tiny model, retrying without waiting."""
    pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")
    from mindcap_tok.generation.backends.server import ServerBackend

    return ServerBackend(str(tiny), "tiny-qwen3", spec.server, backoff_s=0.01, **kw)


#: one request of the test job, and the label errors give it
ONE_REQUEST = {"items": [0], "langs": ["deu_Latn"]}
LABEL = "request native/deu_Latn/replay-cap12/00000 item 0"
