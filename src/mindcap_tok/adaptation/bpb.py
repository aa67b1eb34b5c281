"""Bits per byte of causal LMs on a fold's held-out FLORES items: the base model and its adapted checkpoints.

Bits per byte does not depend on how a text is cut into tokens, so a model with an extended vocabulary and its base
model compare on the same sentences (perplexities per token would not: the token counts differ).

Definition (docs/adapt.md): each sentence is encoded by the model's own tokenizer without special tokens,
``t_1 … t_n``, and scored after one start token ``s`` (the config's ``bos_token_id``, else its ``eos_token_id``:
the document separator of models without a BOS); ``bits(sentence) = −Σ_i log2 p(t_i | s, t_<i)``, and

    bpb = Σ_sentences bits / Σ_sentences UTF-8 bytes.

Intervals are item-bootstrap percentile intervals over sentences (one resampling matrix per language, shared by
every model, so each model's change against the first one has a paired interval).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data.languages import resolve_language
from ..errors import BadInputError, DamagedDataError, MissingExtraError
from ..resample import DEFAULT_RESAMPLING, Resampling, bootstrap_sums
from ..tokenization.load import load_tokenizer
from .adapt import ADAPT_MANIFEST, check_model_folder
from .corpus import flores_corpus
from .saved import SavedExtension, fold_flores_corpus, fold_lines, load_extension


@dataclass(frozen=True)
class BpbSettings:
    """How bits per byte are measured: the first ``limit`` held-out items (all: ``None``), ``ref`` as the second
    language, FLORES read from ``flores_source``, batches of at most ``max_batch_tokens`` positions, intervals by
    ``resampling``."""

    limit: int | None = None
    ref: str = "eng_Latn"
    flores_source: str | None = None
    max_batch_tokens: int = 512
    resampling: Resampling = DEFAULT_RESAMPLING


def held_out_texts(ext: SavedExtension, *, ref: str = "eng_Latn", source: str | None = None) -> dict[str, list[str]]:
    """The fold's held-out FLORES lines in its language and in ``ref`` (same line ids), keyed by FLORES code.

    Only a fold learned on a FLORES split can be read back (its manifest names the split and hashes the text)."""
    target = fold_flores_corpus(ext, source=source)
    split = target.name.split("/")[1]
    ids = list(ext.held_out)
    english = flores_corpus(ref, split, source=source)
    return {
        target.name.split("/")[2]: fold_lines(ext, target, ids=ids),
        resolve_language(ref): fold_lines(ext, english, ids=ids),
    }


def start_token_id(config) -> int:
    """The token every sentence is scored after: ``bos_token_id``, else ``eos_token_id`` (the first of a list)."""
    for value in (config.bos_token_id, config.eos_token_id):
        value = value[0] if isinstance(value, list | tuple) and value else value
        if isinstance(value, int):
            return value
    raise BadInputError("the model's config has neither bos_token_id nor eos_token_id to start a sentence with")


def _batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped by length (shortest first), each group's padded size at most ``max_tokens`` positions."""
    out: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda k: lengths[k]):
        if out and (len(out[-1]) + 1) * (lengths[i] + 1) <= max_tokens:
            out[-1].append(i)
        else:
            out.append([i])
    return out


@dataclass(frozen=True)
class _Scorer:
    """A checkpoint loaded once for scoring: the model in eval mode, its own tokenizer and its start token."""

    lm: Any
    tokenizer: Any
    start: int


def _scorer(model: str | os.PathLike[str]) -> _Scorer:
    try:
        import torch  # noqa: F401  (the model runs on it)
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "torch", needed_by="bits per byte") from exc
    path = check_model_folder(model)
    lm = AutoModelForCausalLM.from_pretrained(path)
    lm.eval()
    return _Scorer(lm, load_tokenizer(str(path)), start_token_id(lm.config))


def _bits(scorer: _Scorer, texts: Sequence[str], max_batch_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    import torch

    ids = scorer.tokenizer.encode_batch(list(texts))
    bits = np.zeros(len(texts), dtype=np.float64)
    for batch in _batches([len(x) for x in ids], max_batch_tokens):
        width = max(len(ids[i]) for i in batch) + 1
        inp = torch.full((len(batch), width), scorer.start, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            inp[row, 1 : len(ids[i]) + 1] = torch.tensor(ids[i], dtype=torch.long)
            mask[row, : len(ids[i]) + 1] = 1
        with torch.no_grad():
            logits = scorer.lm(input_ids=inp, attention_mask=mask).logits[:, :-1].float()
            picked = logits.gather(-1, inp[:, 1:, None])[..., 0] - logits.logsumexp(-1)
            nats = -(picked.double() * mask[:, 1:]).sum(1)
        bits[batch] = nats.numpy() / math.log(2)
    return bits, np.array([len(x) for x in ids], dtype=np.int64)


def sentence_bits(
    model: str | os.PathLike[str], texts: Sequence[str], *, max_batch_tokens: int = 512
) -> tuple[np.ndarray, np.ndarray, int]:
    """Per sentence: bits (−Σ log2 p of its tokens after the start token) and token count, and the start token id,
    under ``model`` (a checkpoint folder) and its own tokenizer."""
    scorer = _scorer(model)
    return (*_bits(scorer, texts, max_batch_tokens), scorer.start)


def model_init(path: Path, ext: SavedExtension) -> str:
    """A model's init (``base`` for a checkpoint ``adapt`` did not write); refused when ``adapt`` wrote it for
    another extension, whose training lines may be ``ext``'s held-out ones."""
    record = path / ADAPT_MANIFEST
    if not record.is_file():
        return "base"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DamagedDataError(f"{record} is not valid JSON: {exc}") from exc
    if data.get("extension_tokenizer_sha256") != ext.tokenizer.sha256:
        raise BadInputError(
            f"{path} was adapted to another extension than {ext.path} (its training lines may be this fold's "
            "held-out lines): score it with the fold it was adapted to"
        )
    return str(data.get("init", "adapted"))


def _interval(values: np.ndarray, level: float) -> list[float]:
    low, high = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(low), float(high)]


def measure_bpb(
    extension: str | os.PathLike[str] | SavedExtension,
    models: Sequence[str | os.PathLike[str]],
    *,
    settings: BpbSettings = BpbSettings(),
    on_progress: Callable[[int, int | None], None] | None = None,
) -> dict:
    """Bits per byte and tokens per byte of each model on the fold's held-out lines, in its language and in
    ``settings.ref``, with bootstrap intervals; the first model is the reference of each ``bpb_change``.

    ``on_progress(done, total)`` counts scored sentences over all models and both languages."""
    ext = extension if isinstance(extension, SavedExtension) else load_extension(extension)
    if not models:
        raise BadInputError("bits per byte needs at least one model")
    paths = [check_model_folder(m) for m in models]
    inits = [model_init(p, ext) for p in paths]
    texts = held_out_texts(ext, ref=settings.ref, source=settings.flores_source)
    if settings.limit is not None:
        texts = {lang: lines[: settings.limit] for lang, lines in texts.items()}
    res = settings.resampling
    total = len(paths) * sum(map(len, texts.values()))
    done = 0
    scores: dict[str, list] = {lang: [] for lang in texts}
    for path in paths:  # each model loaded once, for both languages
        scorer = _scorer(path)
        for lang, lines in texts.items():
            bits, tokens = _bits(scorer, lines, settings.max_batch_tokens)
            scores[lang].append((path, bits, tokens, scorer.start))
            done += len(lines)
            if on_progress is not None:
                on_progress(done, total)
        del scorer
    rows = []
    for lang, lines in texts.items():
        n_bytes = np.array([len(t.encode("utf-8")) for t in lines], dtype=np.float64)
        scored = scores[lang]
        sums = None
        if res.n_boot:
            sums = bootstrap_sums(np.column_stack([n_bytes, *(s[1] for s in scored)]), res.n_boot, seed=res.seed)
        for k, (path, bits, tokens, start_id) in enumerate(scored):
            bpb = float(bits.sum() / n_bytes.sum())
            row = {
                "model": path.name,
                "init": inits[k],
                "lang": lang,
                "sentences": len(lines),
                "bytes": int(n_bytes.sum()),
                "tokens": int(tokens.sum()),
                "tokens_per_byte": float(tokens.sum() / n_bytes.sum()),
                "bits": float(bits.sum()),
                "bpb": bpb,
                "bpb_ci": None if sums is None else _interval(sums[:, 1 + k] / sums[:, 0], res.level),
                "bpb_change": bpb - float(scored[0][1].sum() / n_bytes.sum()),
                "bpb_change_ci": None
                if sums is None
                else _interval((sums[:, 1 + k] - sums[:, 1]) / sums[:, 0], res.level),
                "start_token_id": start_id,
            }
            rows.append(row)
    return {
        "extension": str(ext.path),
        "corpus": (ext.manifest.get("corpus") or {}).get("name"),
        "fold": ext.manifest.get("fold"),
        "held_out_items": len(ext.held_out),
        "limit": settings.limit,
        "n_boot": res.n_boot,
        "seed": res.seed,
        "level": res.level,
        "models": [str(p) for p in paths],
        "rows": rows,
    }
