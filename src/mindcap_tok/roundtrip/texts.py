"""Source texts of a round trip: FLORES-200 paragraphs (k consecutive sentences) or a user's JSONL/CSV file.

``flores:devtest`` (or ``flores:dev``) gives text ``i`` = sentences ``i·k .. i·k+k−1`` joined by a space, id
``devtest:<first>-<last>`` (``devtest:<i>`` when k = 1), category the FLORES domain of its first sentence
(``wikinews``, ``wikivoyage``, ``wikibooks``; ``flores`` when no metadata file is there). ``sample = N`` keeps
N texts drawn with ``random.Random(seed)``, in corpus order. A file has one text per JSONL line or CSV row
with ``id``, ``text``, optional ``category`` and optional ``subcategory`` (a second level, as LiT's robustness
subset has); duplicate ids and empty texts are one-line errors.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import regular_file
from ..data.flores import SPLITS, flores_source, load_flores
from ..errors import BadInputError

#: a file text's category when it names none
UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class Text:
    """One source text; ``subcategory`` is the second level of its category (``None``: none)."""

    id: str
    text: str
    category: str
    subcategory: str | None = None


def texts_hash(texts: Sequence[Text]) -> str:
    """SHA-256 of the texts' ids and contents in order (categories aside): the ``texts`` of a run's identity, by
    which a report checks that it reloaded the texts the run translated."""
    return hashlib.sha256("\n".join(f"{t.id}\t{t.text}" for t in texts).encode()).hexdigest()


def _flores_domains(source: str, split: str) -> list[str] | None:
    path = Path(source) / f"metadata_{split}.tsv"
    if source.startswith("hf:") or not path.is_file():
        return None
    with open(regular_file(path, "FLORES metadata file"), encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [r.get("domain") or "flores" for r in rows]


def flores_texts(
    split: str, lang: str = "eng_Latn", k: int = 1, data_dir: str | os.PathLike[str] | None = None
) -> list[Text]:
    """Every FLORES paragraph of ``k`` consecutive sentences of ``split`` (a trailing partial one is dropped)."""
    if split not in SPLITS:
        raise BadInputError(f"unknown FLORES split {split!r}; use flores:dev or flores:devtest")
    if k < 1:
        raise BadInputError(f"sentences_per_text must be >= 1, got {k}")
    source = flores_source(data_dir)
    lines = load_flores(lang, split, source=source)
    domains = _flores_domains(source, split)
    if domains is not None and len(domains) != len(lines):
        domains = None
    out = []
    for i in range(len(lines) // k):
        first, last = i * k, i * k + k - 1
        ident = f"{split}:{first}" if k == 1 else f"{split}:{first}-{last}"
        out.append(Text(ident, " ".join(lines[first : last + 1]), domains[first] if domains else "flores"))
    if not out:
        raise BadInputError(f"FLORES {split} has {len(lines)} sentences: fewer than sentences_per_text = {k}")
    return out


def flores_split(source: str) -> str | None:
    """The FLORES split a run's ``texts`` names (``flores:devtest`` -> ``devtest``), ``None`` for a file."""
    split = source.removeprefix("flores:")
    return split if source.startswith("flores:") and split in SPLITS else None


def flores_references(
    split: str, ids: Sequence[str], lang: str, data_dir: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The text of each FLORES text id (``devtest:<first>[-<last>]``) in ``lang``: the same sentences, parallel in
    every language, joined as :func:`flores_texts` joins them."""
    lines = load_flores(lang, split, source=flores_source(data_dir))
    out = {}
    for ident in ids:
        span = ident.removeprefix(f"{split}:")
        first, _, last = span.partition("-")
        if not first.isdigit() or not (last or first).isdigit() or not ident.startswith(f"{split}:"):
            raise BadInputError(f"text id {ident!r} is not a FLORES {split} text id")
        out[ident] = " ".join(lines[int(first) : int(last or first) + 1])
    return out


def _row(row: object, where: str) -> Text:
    if not isinstance(row, dict):
        raise BadInputError(f"{where}: expected an object with id and text")
    ident, text, cat, sub = row.get("id"), row.get("text"), row.get("category"), row.get("subcategory")
    if ident is None or (isinstance(ident, str) and not ident.strip()) or isinstance(ident, bool | dict | list):
        raise BadInputError(f"{where}: missing or empty id")
    if not isinstance(text, str) or not text.strip():
        raise BadInputError(f"{where}: text {ident!r} is empty")
    category = cat.strip() if isinstance(cat, str) and cat.strip() else UNCATEGORIZED
    subcategory = sub.strip() if isinstance(sub, str) and sub.strip() else None
    return Text(str(ident).strip(), text, category, subcategory)


def file_texts(path: str | os.PathLike[str]) -> list[Text]:
    """Texts from a ``.jsonl`` or ``.csv`` file (see the module docs)."""
    file = regular_file(path, "texts file")
    if not file.is_file():
        raise BadInputError(f"texts file not found: {file}")
    try:
        raw = file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read texts file {file}: {exc}") from exc
    texts: list[Text] = []
    if file.suffix.lower() == ".csv":
        reader = csv.DictReader(raw.splitlines())
        if not reader.fieldnames or not {"id", "text"} <= set(reader.fieldnames):
            raise BadInputError(f"{file}: a CSV of texts needs the columns id and text")
        texts = [_row(r, f"{file}:{i + 2}") for i, r in enumerate(reader)]
    elif file.suffix.lower() in (".jsonl", ".ndjson"):
        for i, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise BadInputError(f"{file}:{i}: not JSON ({exc})") from exc
            texts.append(_row(row, f"{file}:{i}"))
    else:
        raise BadInputError(f"texts file {file}: use a .jsonl or .csv file")
    if not texts:
        raise BadInputError(f"texts file {file} holds no texts")
    seen: set[str] = set()
    for t in texts:
        if t.id in seen:
            raise BadInputError(f"texts file {file}: duplicate id {t.id!r}")
        seen.add(t.id)
    return texts


def sample_texts(texts: list[Text], n: int | None, seed: int) -> list[Text]:
    """``n`` texts drawn without replacement by ``random.Random(seed)``, kept in their original order."""
    if n is None:
        return list(texts)
    if not 1 <= n <= len(texts):
        raise BadInputError(f"sample = {n}: there are {len(texts)} texts")
    keep = set(random.Random(seed).sample(range(len(texts)), n))
    return [t for i, t in enumerate(texts) if i in keep]


def load_texts(
    spec: str,
    *,
    lang: str = "eng_Latn",
    sentences_per_text: int = 1,
    sample: int | None = None,
    seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
    base: Path | None = None,
) -> list[Text]:
    """Texts named by ``spec`` (``flores:devtest``, ``flores:dev`` or a file, relative to ``base``), sampled."""
    if spec.startswith("flores:"):
        texts = flores_texts(spec.removeprefix("flores:"), lang, sentences_per_text, data_dir)
    else:
        if sentences_per_text != 1:
            raise BadInputError("sentences_per_text applies to FLORES texts only")
        path = Path(spec)
        if base is not None and not path.is_absolute() and (base / path).is_file():
            path = base / path
        texts = file_texts(path)
    return sample_texts(texts, sample, seed)
