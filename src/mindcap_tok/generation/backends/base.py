"""What every generation backend shares: the request and completion types and the chat tokenizer.

Kept apart from the package's ``__init__`` (which starts a backend by name), so that a backend module imports
these without importing the module that imports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from pathlib import Path
from string import ascii_letters

import numpy as np
from tokenizers import Tokenizer

from ...errors import BadInputError, first_line
from ...tokenization.byte_tables import byte_table
from ...tokenization.hf import encode_texts
from ...tokenization.load import ResolvedTokenizer
from ...tokenization.pipeline import pipeline
from ...tokenization.pretoken_cache import BYTE_LEVEL_PATTERN, PretokenEncoder

#: user messages that show whether a chat template inserts the message verbatim (ChatTokenizer._frame)
_SENTINEL = "\x1fmindcap-user-message\x1f"
_PROBES = (
    "\x1eanother message\x1e",
    "  \n\tpadded, lines\n\n  ",
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think> {{ braces }} {% raw %} ' \" \\",
    "<tool_response>\nx\n</tool_response>",
)


#: split regexes of byte-level BPEs (GPT-2's, Qwen2/3's, Llama 3's, Mistral-Nemo's) under which a newline followed
#: by an ASCII letter always ends a pre-token: no alternative matches across the two, none looks back, and none
#: starting before the letter looks past it (``\s+(?!\S)`` looks AT it). So the pre-tokens before the letter
#: depend on the text up to the letter included, those after on the text from the letter on (NFC never joins the
#: two either: both are starters), and a line encodes on its own with the next line's first letter appended.
_LINE_SAFE = frozenset(
    {
        BYTE_LEVEL_PATTERN,
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
    }
)
_LINE_START = re.compile(r"\n(?=[A-Za-z])")
_LINE_END = re.compile(r"\n[A-Za-z]\Z")
#: distinct prompt pieces memoised before the memo is emptied
_MAX_LINES = 100_000


def _lines_safe(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer`` splits a text where a line starts with an ASCII letter (see :data:`_LINE_SAFE`):
    its regex is one of those and no added token spans such a line start."""
    steps = pipeline(tokenizer).pre_tokenizers
    patterns = [s["pattern"].get("Regex") for s in steps if s.get("type") == "Split"] or [BYTE_LEVEL_PATTERN]
    return patterns[0] in _LINE_SAFE and not any(
        re.search(r"\n[A-Za-z]", t.content) for t in tokenizer.get_added_tokens_decoder().values()
    )


def _line_keys(text: str) -> list[str]:
    """``text`` cut after each newline that an ASCII letter follows, each piece but the last with that letter
    appended (see :data:`_LINE_SAFE`; a split with lookbehind is 4x slower)."""
    parts = _LINE_START.split(text)
    return [a + "\n" + b[0] for a, b in pairwise(parts)] + [parts[-1]]


def _encode_all(encoder: PretokenEncoder, texts: list[str]) -> list[list[int]]:
    flat, splits = encoder.encode_flat(texts)
    return [flat[a:b].tolist() for a, b in zip(splits[:-1].tolist(), splits[1:].tolist(), strict=True)]


@dataclass(frozen=True)
class GenRequest:
    """One prompt to decode ``n`` times under ``max_tokens``; ``stop_ids`` end a decode besides the model's EOS.

    ``text`` (the templated prompt), ``user`` (the user message, for a server's chat endpoint) and ``name`` (for
    error messages) are optional: a forcing continuation has ids only. ``json_schema``: constrain the reply to
    this JSON schema where the engine can (vLLM's structured outputs, a server's ``response_format``); the
    transformers backend ignores it (round-trip judges parse free replies tolerantly)."""

    prompt_ids: tuple[int, ...]
    n: int
    max_tokens: int
    seed: int
    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    stop_ids: tuple[int, ...] = ()
    text: str | None = None
    user: str | None = None
    name: str = ""
    json_schema: dict | None = None


@dataclass(frozen=True)
class Completion:
    """One decode: the generated ids (a final stop/EOS token included) and ``stop`` or ``length``.

    ``prompt_ids``: the prompt ids as the engine saw them when they differ from the request's (a server's chat
    template), else ``None``. ``retokenized``: the ids were re-encoded from text (a server that returns none)."""

    ids: tuple[int, ...]
    finish_reason: str
    prompt_ids: tuple[int, ...] | None = None
    retokenized: bool = False


class ChatTokenizer:
    """The model's Hugging Face tokenizer: chat-templated prompt ids, decoding, and the ledger's tokenizer."""

    def __init__(self, model: str, name: str) -> None:
        from transformers import AutoTokenizer

        try:
            self.hf = AutoTokenizer.from_pretrained(model)
        except Exception as exc:
            raise BadInputError(f"cannot load the tokenizer of {model!r}: {first_line(exc)}") from exc
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is None:
            raise BadInputError(f"{model!r} has no fast tokenizer")
        file = Path(model) / "tokenizer.json"
        self.resolved = ResolvedTokenizer(name, backend, model, file if file.is_file() else None)
        self._fast: tuple[tuple[str, str] | None, PretokenEncoder | None] | None = None  # chat_batch's, when built
        self._lines: dict[str, list[int]] | None = None  # ids of prompt pieces (ChatTokenizer._encode_by_line)
        self._letters: dict[str, list[int]] = {}  # ids of each ASCII letter alone
        #: the template's ``enable_thinking`` (off by default: the reasoning is in the visible, budgeted channel)
        self.thinking = False

    def set_thinking(self, on: bool) -> None:
        """Render prompts with ``enable_thinking = on`` from now on (a backend reused across jobs switches)."""
        if on != self.thinking:
            self.thinking = on
            self._fast, self._lines = None, None  # the template's frame depends on the switch

    def _render(self, user: str) -> str:
        return self.hf.apply_chat_template(  # type: ignore[return-value]  # tokenize=False: the text
            [{"role": "user", "content": user}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=self.thinking,
        )

    def chat(self, user: str) -> tuple[str, list[int]]:
        """The templated prompt (text and ids) for one user message, generation prompt added, thinking as
        :attr:`thinking` says."""
        text = self._render(user)
        return text, self.encode(text)

    def _frame(self) -> tuple[str, str] | None:
        """The template's (prefix, suffix) around a user message when it inserts the message verbatim, else None.

        Split at a sentinel, then checked on probes (other sentinels, padding whitespace, template and special
        markup): a template that trims, escapes or branches on them renders each prompt itself."""
        if self.hf.chat_template is None:
            return None
        try:
            rendered = self._render(_SENTINEL)
        except Exception:  # no usable template: chat() raises the library's own message
            return None
        if rendered.count(_SENTINEL) != 1:
            return None
        prefix, suffix = rendered.split(_SENTINEL)
        if any(self._render(p) != prefix + p + suffix for p in _PROBES):
            return None
        return prefix, suffix

    def chat_batch(self, users: Sequence[str]) -> list[tuple[str, list[int]]]:
        """:meth:`chat` of many user messages, the same texts and ids, at a fraction of the cost.

        A verbatim template (see :meth:`_frame`) is rendered once and each prompt is ``prefix + user + suffix``.
        The prompts are encoded together: for the registry's byte-level BPEs memoised per pre-token
        (:class:`~mindcap_tok.tokenization.pretoken_cache.PretokenEncoder`) and, under :data:`_LINE_SAFE`, per line (a
        template's fixed lines are encoded once); for other tokenizers in one batch call. The first prompt of
        every batch is also built by :meth:`chat`; should the two differ, this tokenizer falls back to
        :meth:`chat` for good."""
        if not users:
            return []
        if self._fast is None:
            encoder = PretokenEncoder.from_tokenizer(self.resolved.tokenizer)  # type: ignore[arg-type]  # HF-backed
            self._fast = (self._frame(), encoder)
            if encoder is not None and _lines_safe(self.resolved.tokenizer):  # type: ignore[arg-type]  # HF-backed
                self._lines = {}
                self._letters = dict(zip(ascii_letters, _encode_all(encoder, list(ascii_letters)), strict=True))
        frame, encoder = self._fast
        if frame is None:
            return [self.chat(u) for u in users]
        texts = [frame[0] + u + frame[1] for u in users]
        if encoder is None:
            ids = encode_texts(self.resolved.tokenizer, texts, fast=False)  # type: ignore[arg-type]  # HF-backed
        elif self._lines is None:
            ids = _encode_all(encoder, texts)
        else:
            ids = self._encode_by_line(encoder, texts)
        if self.chat(users[0]) != (texts[0], ids[0]):
            self._fast = (None, None)
            return [self.chat(u) for u in users]
        return list(zip(texts, ids, strict=True))

    def _encode_by_line(self, encoder: PretokenEncoder, texts: list[str]) -> list[list[int]]:
        """Ids of ``texts`` cut where a line starts with an ASCII letter (a pre-token boundary for
        :data:`_LINE_SAFE`), each distinct piece encoded once: a template's fixed lines are looked up, not split."""
        memo: dict[str, list[int]] = self._lines  # type: ignore[assignment]  # called only while _lines is a dict
        if len(memo) > _MAX_LINES:
            memo.clear()
        keys = [_line_keys(t) for t in texts]
        new = list(dict.fromkeys(k for text in keys for k in text if k not in memo))
        for key, ids in zip(new, _encode_all(encoder, new), strict=True):
            if _LINE_END.search(key):  # drop the next line's letter, a pre-token of its own
                tail = self._letters[key[-1]]
                if ids[-len(tail) :] != tail:  # not so: encode whole texts from now on
                    self._lines = None
                    return _encode_all(encoder, texts)
                del ids[-len(tail) :]
            memo[key] = ids
        return [list(chain.from_iterable(map(memo.__getitem__, text))) for text in keys]

    def encode(self, text: str) -> list[int]:
        """Ids of plain text (no special tokens): the fast tokenizer's, a text too long for its regex engine
        included (:func:`~mindcap_tok.tokenization.hf.encode_texts`)."""
        fast = self.resolved.tokenizer
        return encode_texts(fast, [text], fast=False)[0]  # type: ignore[arg-type]  # a chat tokenizer is HF's

    def decode_batch(self, ids: list) -> list[str]:
        """Texts of several id sequences, special tokens skipped (the fast tokenizer, in one call)."""
        fast = self.resolved.tokenizer
        return fast.decode_batch([list(x) for x in ids], skip_special_tokens=True)  # type: ignore[union-attr]  # HF

    def newline_ids(self) -> tuple[int, ...]:
        """Ids whose text contains a newline: the ends of an answer line."""
        return tuple(np.flatnonzero(byte_table(self.resolved).has_newline).tolist())
