"""MGSM loader: 250 grade-school maths problems in 11 languages, plus the 8 few-shot exemplars per language.

The source is a local folder laid out as the upstream release (``mgsm_<lang>.tsv`` with rows
``question<TAB>answer`` and no header, ``mgsm_exemplars.json``), found at ``<data_dir>/mgsm`` from the
configuration. Question text is returned exactly as published (no Unicode normalisation), because it is
what a prompt sends to the model. Gold answers are integers: the thousands separators in four upstream
answers (``5,600``) are stripped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .._io import regular_file
from ..config import load_config
from ..data.languages import resolve_language, short_name
from ..errors import BadInputError

#: FLORES codes of the 11 MGSM languages, in the upstream file order
MGSM_LANGUAGES = (
    "ben_Beng",
    "deu_Latn",
    "eng_Latn",
    "spa_Latn",
    "fra_Latn",
    "jpn_Jpan",
    "rus_Cyrl",
    "swh_Latn",
    "tel_Telu",
    "tha_Thai",
    "zho_Hans",
)
N_ITEMS = 250
_HOW = "set data_dir in mindcap.toml, MINDCAP_DATA_DIR or --data-dir"


@dataclass(frozen=True)
class MgsmItem:
    """One MGSM problem in one language; ``item`` is the row index (0..249), the same in every language."""

    item: int
    lang: str
    question: str
    answer: int
    answer_text: str


@dataclass(frozen=True)
class Exemplar:
    """One few-shot chain-of-thought exemplar (upstream prefixes such as "Question:" kept as published)."""

    index: int
    lang: str
    question: str
    answer: str
    number_answer: int
    equation: str


def mgsm_source(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The MGSM folder in force: ``<data_dir>/mgsm`` (argument, else configuration)."""
    root = Path(data_dir) if data_dir is not None else load_config().data_dir.value
    if root is None:
        raise BadInputError(f"no data folder configured for MGSM ({_HOW})")
    folder = root / "mgsm"
    if not folder.is_dir():
        raise BadInputError(f"MGSM folder not found: {folder} ({_HOW})")
    return folder


def mgsm_language(lang: str) -> str:
    """The FLORES code of an MGSM language (alias or code); error if MGSM does not cover it."""
    code = resolve_language(lang)
    if code not in MGSM_LANGUAGES:
        names = ", ".join(f"{short_name(c)} ({c})" for c in MGSM_LANGUAGES)
        raise BadInputError(f"MGSM has no {code}; its languages are {names}")
    return code


def parse_gold(text: str, where: str = "") -> int:
    """``"5,600"`` -> ``5600``: an MGSM gold answer as an integer (thousands separators stripped)."""
    cleaned = text.strip().replace(",", "")
    try:
        return int(cleaned)
    except ValueError as exc:
        raise BadInputError(
            f"MGSM gold answer {text!r} is not an integer{' (' + where + ')' if where else ''}"
        ) from exc


@cache
def _read_tsv(folder: str, code: str) -> tuple[MgsmItem, ...]:
    path = Path(folder) / f"mgsm_{short_name(code)}.tsv"
    try:
        text = regular_file(path, "MGSM file").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BadInputError(f"MGSM file missing: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read MGSM file {path}: {exc}") from exc
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    items = []
    for i, row in enumerate(rows):
        question, tab, answer = row.rpartition("\t")
        if not tab:
            raise BadInputError(f"{path}:{i + 1}: expected question<TAB>answer")
        items.append(MgsmItem(i, code, question, parse_gold(answer, f"{path}:{i + 1}"), answer))
    if len(items) != N_ITEMS:
        raise BadInputError(f"{path} has {len(items)} rows, expected {N_ITEMS}")
    return tuple(items)


def load_mgsm(lang: str, data_dir: str | os.PathLike[str] | None = None) -> list[MgsmItem]:
    """The 250 MGSM items of one language (FLORES code or alias), in upstream row order."""
    return list(_read_tsv(str(mgsm_source(data_dir)), mgsm_language(lang)))


def mgsm_gold(data_dir: str | os.PathLike[str] | None = None) -> list[int]:
    """Gold answers by item (identical in every language; taken from the English file)."""
    return [it.answer for it in load_mgsm("eng_Latn", data_dir)]


@cache
def _read_exemplars(folder: str) -> dict:
    path = Path(folder) / "mgsm_exemplars.json"
    try:
        return json.loads(regular_file(path, "MGSM exemplars file").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BadInputError(f"MGSM exemplars file missing: {path}") from exc
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot read MGSM exemplars {path}: {exc}") from exc


def load_exemplars(lang: str, data_dir: str | os.PathLike[str] | None = None) -> list[Exemplar]:
    """The 8 few-shot exemplars of one language, with their numeric answers and equations."""
    return _exemplars(str(mgsm_source(data_dir)), mgsm_language(lang))


#: the corpus of MGSM's questions, by name (``premium --corpus``, ``extend --corpus``)
QUESTIONS = "mgsm"
#: parallel MGSM texts a token premium can be measured on (``premium --corpus``): name -> what it holds
MGSM_CORPORA = {QUESTIONS: "the 250 questions", "mgsm-answers": "the 8 exemplar answers"}


def question_corpus(
    lang: str, data_dir: str | os.PathLike[str] | None = None
) -> tuple[str, tuple[tuple[int, str], ...]]:
    """The name (``mgsm/<code>/questions``) and the (item, question) pairs of one language's 250 MGSM questions."""
    code = mgsm_language(lang)
    return f"mgsm/{code}/questions", tuple((it.item, it.question) for it in load_mgsm(code, data_dir))


def mgsm_texts(lang: str, corpus: str = "mgsm", *, folder: str | os.PathLike[str] | None = None) -> list[str]:
    """Line-aligned MGSM texts of one language (as published): its questions (``mgsm``) or the chain-of-thought
    answers of its 8 exemplars (``mgsm-answers``). ``folder`` is the MGSM folder (default: configured)."""
    if corpus not in MGSM_CORPORA:
        raise BadInputError(f"unknown MGSM corpus {corpus!r}; use one of {', '.join(MGSM_CORPORA)}")
    where, code = str(folder or mgsm_source()), mgsm_language(lang)
    if corpus == "mgsm":
        return [it.question for it in _read_tsv(where, code)]
    return [ex.answer for ex in _exemplars(where, code)]


def _exemplars(folder: str, code: str) -> list[Exemplar]:
    raw = _read_exemplars(folder)
    try:
        by_lang = raw["MGSM_EXEMPLARS"][short_name(code)]
        numbers = raw["EXEMPLAR_NUMBER_ANSWERS"]
        equations = raw["EXEMPLAR_EQUATION_SOLUTIONS"]
        keys = sorted(by_lang, key=int)
        return [
            Exemplar(int(k), code, by_lang[k]["q"], by_lang[k]["a"], int(numbers[int(k) - 1]), equations[int(k) - 1])
            for k in keys
        ]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise BadInputError(f"MGSM exemplars file has no usable entry for {code}: {exc!r}") from exc
