"""Chat requests through a generation backend, one decode each: the plumbing of round-trip hops, judge rounds and
trace renderings (:mod:`.run`, :mod:`.render`)."""

from __future__ import annotations

from ..errors import BackendError
from ..generation import GenRequest


def generator_label(backend) -> str:
    """The ``generator`` column of a reply: the backend's name and version."""
    return f"{getattr(backend, 'name', type(backend).__name__)} {getattr(backend, 'version', '')}".strip()


def chat_requests(
    backend, asks: list[tuple[str, int, str]], cap: int, sampling, json_schema: dict | None = None
) -> list[GenRequest]:
    """One request per ``(user message, seed, name)``, all prompts templated and encoded in one batch."""
    prompts = backend.tok.chat_batch([user for user, _, _ in asks])
    common = {
        "n": 1,
        "max_tokens": cap,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "json_schema": json_schema,
    }
    return [
        GenRequest(prompt_ids=tuple(ids), seed=seed, text=text, user=user, name=name, **common)
        for (user, seed, name), (text, ids) in zip(asks, prompts, strict=True)
    ]


def decode_requests(backend, requests: list[GenRequest]) -> list[tuple[tuple[int, ...], tuple[int, ...], str, str]]:
    """(prompt ids, output ids, text, finish reason) per request, one decode each."""
    if not requests:
        return []
    done = backend.generate(requests)
    if len(done) != len(requests) or any(len(c) != 1 for c in done):
        raise BackendError("the backend returned a different number of completions than requested")
    comps = [c[0] for c in done]
    texts = backend.tok.decode_batch([c.ids for c in comps])
    return [
        (c.prompt_ids or r.prompt_ids, c.ids, t, c.finish_reason)
        for r, c, t in zip(requests, comps, texts, strict=True)
    ]
