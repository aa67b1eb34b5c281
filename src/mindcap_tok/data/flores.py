"""FLORES-200 loader: dev/devtest, any of the 204 languages, NFC (or raw, on request), line-alignment checked.

Source is a local folder laid out as the original release (``<root>/<split>/<code>.<split>``), found at
``<data_dir>/flores200`` from the configuration, or a Hugging Face dataset named ``hf:<id>`` (online users).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from .._io import regular_file
from ..choices import SPLITS as SPLITS
from ..config import hub_unavailable, load_config
from ..errors import BadInputError, SetupError, first_line
from .languages import resolve_language

DEFAULT_HF_DATASET = "hf:openlanguagedata/flores_plus"


def flores_source(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The FLORES source in force: ``<data_dir>/flores200`` (configured) or the Hugging Face default."""
    root = Path(data_dir) if data_dir is not None else load_config().data_dir.value
    if root is None:
        return DEFAULT_HF_DATASET
    folder = root / "flores200"
    if not folder.is_dir():
        raise BadInputError(
            f"FLORES-200 folder not found: {folder} (set data_dir in mindcap.toml, MINDCAP_DATA_DIR or --data-dir)"
        )
    return str(folder)


def flores_file(source: str, code: str, *, split: str) -> str:
    """Where one language's sentences come from, for messages: the local file path or the hub dataset and config."""
    return f"{source} {code}/{split}" if source.startswith("hf:") else str(Path(source) / split / f"{code}.{split}")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise BadInputError(f"unknown FLORES split {split!r}; use one of {', '.join(SPLITS)}")


@cache
def _read_local(folder: str, code: str, split: str, nfc: bool = True) -> tuple[str, ...]:
    path = Path(folder) / split / f"{code}.{split}"
    try:
        text = regular_file(path, "FLORES file").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BadInputError(f"FLORES file missing: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read FLORES file {path}: {exc}") from exc
    if nfc:  # the whole file at once: a newline is a starter no mark composes with, so lines come out the same
        text = unicodedata.normalize("NFC", text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise BadInputError(f"FLORES file is empty: {path}")
    return tuple(lines)


@cache
def _read_hub(dataset_id: str, code: str, split: str, nfc: bool = True) -> tuple[str, ...]:
    # Hub path for online users; FLORES+ names its text column "text" (the original release used "sentence").
    hint = (
        "point mindcap-tok at a local copy: data_dir in mindcap.toml (this folder, a parent, or the user's "
        "config folder), MINDCAP_DATA_DIR, or --data-dir"
    )
    why = hub_unavailable()
    if why is not None:
        raise BadInputError(f"no local FLORES-200 folder and {why}; {hint}")
    try:
        import datasets
    except ImportError as exc:
        raise SetupError("the Hugging Face `datasets` package is needed to read FLORES from the hub") from exc
    try:
        ds = datasets.load_dataset(dataset_id, code, split=split)
    except Exception as exc:
        raise BadInputError(f"cannot load {code}/{split} from hf:{dataset_id} ({first_line(exc)}); {hint}") from exc
    column = "text" if "text" in ds.column_names else "sentence"
    if not len(ds):
        raise BadInputError(f"FLORES data is empty: hf:{dataset_id} {code}/{split}")
    return tuple(unicodedata.normalize("NFC", s) for s in ds[column]) if nfc else tuple(ds[column])


def load_flores(lang: str, split: str = "devtest", *, source: str | None = None, nfc: bool = True) -> list[str]:
    """Sentences of one language, NFC-normalised (as in the file with ``nfc=False``); ``lang`` may be an alias."""
    _check_split(split)
    code = resolve_language(lang)
    src = source or flores_source()
    if src.startswith("hf:"):
        return list(_read_hub(src[3:], code, split, nfc))
    return list(_read_local(src, code, split, nfc))


def load_parallel(
    langs: Iterable[str],
    split: str = "devtest",
    *,
    source: str | None = None,
    ref: str = "eng_Latn",
    nfc: bool = True,
) -> dict[str, list[str]]:
    """Line-aligned sentences for ``ref`` and every language (keys are FLORES codes, ``ref`` first).

    ``nfc=False`` keeps the text as in the files. Raises a :class:`MindcapError` naming the file and both
    line counts when a file is misaligned.
    """
    _check_split(split)
    src = source or flores_source()
    ref_code = resolve_language(ref)
    out = {ref_code: load_flores(ref_code, split, source=src, nfc=nfc)}
    n_ref = len(out[ref_code])
    for lang in langs:
        code = resolve_language(lang)
        if code in out:
            continue
        lines = load_flores(code, split, source=src, nfc=nfc)
        if len(lines) != n_ref:
            raise BadInputError(
                f"FLORES files are not line-aligned: {flores_file(src, code, split=split)} has {len(lines)} lines, "
                f"{ref_code}.{split} has {n_ref}"
            )
        out[code] = lines
    return out
