"""FOCUS (Dobler & de Melo, EMNLP 2023, "FOCUS: Effective Embedding Initialization for Monolingual Specialization
of Multilingual Models"): a new token's row is a sparsemax-weighted combination of the rows of "overlapping" tokens,
weighted by similarity in an auxiliary static embedding space.

Here (docs/adapt.md): the auxiliary space is fastText CBOW trained on the fold's training text encoded by the
extended tokenizer (each token id one "word"); the overlapping tokens are the base tokens that have an auxiliary
vector (every base token survives an extension, so overlap is the base vocabulary that occurs in that text); a new
token's weights are ``sparsemax(cos(f_new, f_o) for o in overlapping)``. A new token without an auxiliary vector
(it never occurs in the encoded text, e.g. a step of a longer merge) gets no weights: ``adapt`` falls back to FVT.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BadInputError, MissingExtraError

#: fastText settings of the auxiliary embeddings: small (seconds on a CPU), one thread, so the vectors are
#: deterministic (these bindings' ``train_unsupervised`` fixes fastText's seed at 0 and takes none)
FASTTEXT_SETTINGS = {"model": "cbow", "dim": 64, "epoch": 5, "neg": 10, "minCount": 1, "bucket": 200_000, "thread": 1}
#: token id ``i`` is written as the one code point ``chr(WORD_BASE + i)`` (planes 3 and up): fastText's character
#: n-grams of such a word are only the word itself, so ids sharing digits share nothing (its n-grams cannot be
#: switched off here: ``minn=maxn=0`` makes these bindings' training diverge)
WORD_BASE = 0x30000


def sparsemax(z: np.ndarray) -> np.ndarray:
    """Sparsemax of a vector (Martins & Astudillo 2016, "From Softmax to Sparsemax"): the Euclidean projection of
    ``z`` onto the probability simplex, ``max(z - tau, 0)`` with ``tau`` from the sorted values.

    Hand-written: no library in this project's extras provides it (``entmax`` would, for torch only)."""
    z = np.asarray(z, dtype=np.float64)
    desc = np.sort(z)[::-1]
    k = np.arange(1, z.size + 1)
    cumulative = np.cumsum(desc)
    support = k[1 + k * desc > cumulative][-1]  # the largest k with 1 + k z_(k) > sum_{j<=k} z_(j)
    tau = (cumulative[support - 1] - 1) / support
    return np.maximum(z - tau, 0.0)


def _fasttext():
    try:
        import fasttext
    except ImportError as exc:
        raise MissingExtraError("fasttext-numpy2", "lid", needed_by="adapt --init focus") from exc
    if not hasattr(fasttext, "train_unsupervised"):  # fasttext-predict's module of the same name cannot train
        raise MissingExtraError("fasttext-numpy2", "lid", needed_by="adapt --init focus")
    return fasttext


def auxiliary_vectors(encoded: Sequence[Sequence[int]]) -> dict[int, np.ndarray]:
    """fastText vectors (``FASTTEXT_SETTINGS``) of every token id that occurs in ``encoded`` (one list of ids per
    line), trained on those lines: the auxiliary embeddings of FOCUS."""
    fasttext = _fasttext()
    lines = [" ".join(chr(WORD_BASE + i) for i in ids) for ids in encoded if ids]
    if not lines:
        raise BadInputError("focus needs training text: the fold's training lines encode to no tokens")
    with tempfile.TemporaryDirectory(prefix="mindcap-focus-") as tmp:
        path = Path(tmp) / "encoded.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        model = fasttext.train_unsupervised(str(path), verbose=0, **FASTTEXT_SETTINGS)
    return {
        ord(word) - WORD_BASE: np.asarray(model.get_word_vector(word), dtype=np.float32)
        for word in model.words
        if len(word) == 1 and ord(word) >= WORD_BASE  # not fastText's end-of-line word
    }


@dataclass(frozen=True)
class FocusWeights:
    """Each new token's combination (``combos``: new id → (overlapping base ids, sparsemax weights), nonzero
    weights only), the new ids without an auxiliary vector (``fallback``), and how many overlapping tokens there
    were."""

    combos: dict[int, tuple[list[int], list[float]]]
    fallback: list[int]
    overlapping: int

    def as_dict(self) -> dict:
        """Counts for ``adaptation.json``."""
        support = [len(ids) for ids, _ in self.combos.values()]
        return {
            "overlapping_tokens": self.overlapping,
            "focus_tokens": len(self.combos),
            "fallback_mean_tokens": len(self.fallback),
            "mean_support": (sum(support) / len(support)) if support else None,
            "fasttext": dict(FASTTEXT_SETTINGS),
        }


def focus_weights(vectors: dict[int, np.ndarray], *, first_new_id: int, vocab_size: int) -> FocusWeights:
    """FOCUS weights of the new ids ``first_new_id … vocab_size-1`` over the base ids that have a vector in
    ``vectors``: sparsemax of the cosine similarities (in float64)."""
    overlap = sorted(i for i in vectors if i < first_new_id)
    if not overlap:
        raise BadInputError("focus: no base token occurs in the fold's training text (no overlapping tokens)")
    base = np.stack([vectors[i] for i in overlap]).astype(np.float64)
    base /= np.maximum(np.linalg.norm(base, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    combos: dict[int, tuple[list[int], list[float]]] = {}
    fallback = []
    for new_id in range(first_new_id, vocab_size):
        vector = vectors.get(new_id)
        norm = 0.0 if vector is None else float(np.linalg.norm(vector))
        if vector is None or norm == 0.0:
            fallback.append(new_id)
            continue
        weights = sparsemax(base @ (vector.astype(np.float64) / norm))
        keep = np.flatnonzero(weights)
        combos[new_id] = ([overlap[k] for k in keep], weights[keep].tolist())
    return FocusWeights(combos, fallback, len(overlap))
