"""Cross-fitted extensions: split items into k seeded folds; fold f's extension learns only from other folds.

Paper §6: "Extensions are cross-fitted over two disjoint halves of the item set, so no evaluated item
contributed a merge, and the extension size is fixed in advance by a rule that never consults accuracy."
Item ids (not texts) are split, so all traces of one MGSM item land in the same fold.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._io import check_new_folder, new_folder
from .._json import dumps_strict
from ..data.languages import resolve_language
from ..errors import BadInputError
from ..resample import Resampling
from ..tokenization.load import ResolvedTokenizer
from .corpus import Corpus, ItemId, as_corpus
from .effect import Effect, measure_effect
from .extend import Extension, learn_extension
from .saved import PRODUCER, SUMMARY, extension_record, resolved, transformers_row, write_extension


def _sort_key(item: ItemId) -> tuple[int, int | str]:
    return (0, item) if isinstance(item, int) else (1, item)


def assign_folds(item_ids: Iterable[ItemId], folds: int = 2, *, seed: int = 0) -> dict[ItemId, int]:
    """Seeded assignment of distinct items to ``folds`` folds whose sizes differ by at most one.

    Items are sorted first, so the assignment depends on the set of ids and the seed, not on corpus order.
    """
    ids = sorted(set(item_ids), key=_sort_key)
    if folds < 2:
        raise BadInputError(f"cross-fitting needs at least 2 folds, got {folds}")
    if len(ids) < folds:
        raise BadInputError(f"cannot split {len(ids)} items into {folds} folds")
    order = np.random.default_rng(seed).permutation(len(ids))
    return {ids[j]: k % folds for k, j in enumerate(order)}


@dataclass(frozen=True, eq=False)
class FoldExtension:
    """One fold: the items it holds out, the items it learned from, its extension and (once measured) effect."""

    fold: int
    folds: int
    seed: int
    held_out: tuple[ItemId, ...]
    training: tuple[ItemId, ...]
    corpus: dict
    extension: Extension
    effect: Effect | None = None
    #: seconds spent measuring ``effect`` (FLORES encodes and bootstrap); learning time is ``extension.seconds``
    measure_seconds: float = 0.0
    #: the held-out items' texts (what a SentencePiece extension's ``tokenizer.json`` is probed on)
    held_out_texts: tuple[str, ...] = field(default=(), repr=False)

    def manifest(self) -> dict:
        """Manifest of this fold: the extension record, fold membership, seed and the measured effect.

        ``corpus`` identifies the whole corpus the folds were cut from; ``training_corpus`` the part learned on.
        """
        record = extension_record(self.extension)
        record["training_corpus"] = record.pop("corpus")
        out = {
            **record,
            "corpus": self.corpus,
            "fold": self.fold,
            "folds": self.folds,
            "seed": self.seed,
            "held_out_items": list(self.held_out),
            "training_items": list(self.training),
        }
        if self.effect is not None:
            out["effect"] = self.effect.as_dict()
        return out

    def summary(self) -> dict[str, Any]:
        """One summary row (what ``mindcap-tok extend --format json`` prints per fold)."""
        row: dict[str, Any] = {
            "fold": self.fold,
            "merges": self.extension.n_merges,
            "new_tokens": self.extension.n_new_tokens,
            "held_out_items": len(self.held_out),
            "training_items": len(self.training),
        }
        if self.effect is not None:
            e = self.effect
            row |= {
                "lang": e.lang,
                "premium_before": e.before.premium,
                "premium_before_ci": [e.before.ci_low, e.before.ci_high],
                "premium_after": e.after.premium,
                "premium_after_ci": [e.after.ci_low, e.after.ci_high],
                "premium_change": e.change,
                "premium_change_ci": [e.change_ci_low, e.change_ci_high],
                "english_token_change": e.english_token_change,
            }
        row |= transformers_row(self.extension, self.held_out_texts)
        row["seconds"] = round(self.extension.seconds, 3)  # learning the merges
        if self.effect is not None:
            row["measure_seconds"] = round(self.measure_seconds, 3)
        return row


def cross_fit(
    base: ResolvedTokenizer,
    corpus: Corpus | Iterable[tuple[ItemId, str]],
    *,
    folds: int = 2,
    seed: int = 0,
    size: int | None = None,
    min_freq: int | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    add_missing_characters: bool = False,
) -> list[FoldExtension]:
    """Learn one extension per fold on the text of every item outside that fold.

    ``on_progress(merges, total)`` counts merges learned over all folds (``total`` = folds × size, or None under
    a frequency rule); ``add_missing_characters``: see :func:`~.extend.learn_extension`.
    """
    corpus = as_corpus(corpus)
    if not corpus.items:
        raise BadInputError(f"corpus {corpus.name!r} is empty")
    assignment = assign_folds(corpus.item_ids(), folds, seed=seed)
    total = folds * size if size else None
    ordered = sorted(assignment, key=_sort_key)
    out: list[FoldExtension] = []
    for f in range(folds):
        held_out = tuple(i for i in ordered if assignment[i] == f)
        training = tuple(i for i in ordered if assignment[i] != f)
        sub = corpus.select(training, name=f"{corpus.name} without fold {f} of {folds} (seed {seed})")
        before = sum(fx.extension.n_merges for fx in out)
        report = (lambda n, _, before=before: on_progress(before + n, total)) if on_progress else None
        ext = learn_extension(
            base, sub, size=size, min_freq=min_freq, on_progress=report, add_missing_characters=add_missing_characters
        )
        probe = tuple(corpus.select(held_out).texts())
        out.append(FoldExtension(f, folds, seed, held_out, training, corpus.identity(), ext, held_out_texts=probe))
    return out


def measure_folds(
    folds: Sequence[FoldExtension],
    lang: str,
    *,
    split: str = "devtest",
    n_boot: int = 10_000,
    source: str | None = None,
) -> list[FoldExtension]:
    """Each fold with its FLORES effect measured (premium before/after with CIs, English change)."""
    code = resolve_language(lang)
    out = []
    for fx in folds:
        ext = fx.extension
        tok = resolved(ext, f"{ext.base.name}+{code}-fold{fx.fold}")
        start = time.perf_counter()
        effect = measure_effect(
            ext.base, tok, lang=code, split=split, source=source, resampling=Resampling(n_boot, fx.seed)
        )
        out.append(dataclasses.replace(fx, effect=effect, measure_seconds=time.perf_counter() - start))
    return out


def summarize(folds: Sequence[FoldExtension]) -> list[dict]:
    """Summary rows, one per fold plus their mean (``fold`` = ``"mean"``; intervals are not averaged)."""
    rows = [fx.summary() for fx in folds]
    mean: dict = {"fold": "mean"}
    for key, value in rows[0].items():
        if key == "fold":
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            values = [r[key] for r in rows]
            m = float(np.mean(values))
            counts = all(isinstance(v, int) for v in values)
            mean[key] = int(m) if counts and m.is_integer() else m  # a count stays an integer when it can
        elif isinstance(value, str):
            mean[key] = value
    return [*rows, mean]


def save_crossfit(
    folds: Sequence[FoldExtension], out_dir: str | os.PathLike[str], *, extra: dict | None = None
) -> list[dict]:
    """Write ``out_dir/fold-<k>/`` (tokenizer files + manifest) and ``out_dir/summary.json`` atomically; return
    the rows.

    ``extra`` (e.g. the corpus identity and the command line) goes into every manifest and the summary.
    """
    rows = summarize(folds)
    with new_folder(out_dir, PRODUCER) as tmp:
        for fx in folds:
            sub = tmp / f"fold-{fx.fold}"
            sub.mkdir()
            write_extension(fx.extension, sub, manifest={**fx.manifest(), **(extra or {})}, held_out=fx.held_out_texts)
        summary = {"folds": len(folds), "seed": folds[0].seed, "corpus": folds[0].corpus, **(extra or {}), "rows": rows}
        (tmp / SUMMARY).write_text(dumps_strict(summary) + "\n", encoding="utf-8")
    return rows


@dataclass(frozen=True)
class CrossFitting:
    """How cross-fitted extensions are learned: items split into ``folds`` folds by ``seed``; per fold ``size``
    merges and/or merges of pairs seen at least ``min_freq`` times (see :func:`learn_extension`);
    ``add_missing_characters`` (SentencePiece bases) first adds the characters the base vocabulary lacks."""

    folds: int = 2
    seed: int = 0
    size: int | None = None
    min_freq: int | None = None
    add_missing_characters: bool = False


def extend_crossfit(
    base: ResolvedTokenizer,
    corpus: Corpus | Iterable[tuple[ItemId, str]],
    *,
    lang: str,
    learning: CrossFitting = CrossFitting(),
    out_dir: str | os.PathLike[str] | None = None,
    n_boot: int = 10_000,
    flores_source: str | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> list[FoldExtension]:
    """Learn, measure and (with ``out_dir``) save cross-fitted extensions: what ``mindcap-tok extend`` runs.

    ``corpus``: a :class:`Corpus` or any ``(item_id, text)`` pairs (e.g. ``enumerate`` of FLORES lines).

    Each fold's FLORES effect is measured with ``n_boot`` resamples seeded by its fold's seed. ``out_dir`` is
    checked before learning starts, and nothing is written unless every fold succeeds.
    """
    code = resolve_language(lang)
    if out_dir is not None:
        check_new_folder(out_dir)
    fit = learning
    learned = cross_fit(
        base,
        corpus,
        folds=fit.folds,
        seed=fit.seed,
        size=fit.size,
        min_freq=fit.min_freq,
        on_progress=on_progress,
        add_missing_characters=fit.add_missing_characters,
    )
    measured = measure_folds(learned, code, n_boot=n_boot, source=flores_source)
    if out_dir is not None:
        save_crossfit(measured, out_dir, extra={"lang": code})
    return measured
