"""One verdict on a whole run: how much its output-token cap bound it, and the caps to rerun it with.

:func:`check_run` takes a harness's output (lm-evaluation-harness ``--log_samples`` files, inspect_ai logs,
lighteval ``--save-details`` Parquet, mindcap-tok JSON lines; the format detected by :func:`detect_source` or
named) or a ledger folder, imports it into a temporary ledger (removed after; kept with ``ledger_out``), scores
every record at its own cap with its task's strict parser, and reports per model, task, arm, language and cap
(a :class:`CheckCell`):

- the share of traces **cut by the cap** (finish reason ``length``) with a Wilson interval. A trace whose finish
  reason is ``unknown`` (the log does not say: lm-eval's reasoning-model logs keep only the text after the last
  think close, so such a record's length is a lower bound) is neither cut nor completed: a cell holding any has
  no cut share, only its bounds (every unknown trace completed, or every one cut) and the interval from the Wilson
  lower bound of the first to the Wilson upper bound of the second;
- the strict accuracy at the cap of the completed traces and of the cut ones;
- the share never answered (no answer the strict parser reads within the cap);
- the most a higher cap could add to the accuracy: the share cut (or possibly cut) and wrong at the cap, since
  every such trace could still have come out right;
- the premium-scaled cap to rerun with, floor(r·cap), r the language's token premium against English (FLORES-200
  devtest with the run's tokenizer, or the given premium specs), and a ready-to-paste snippet for the harness the
  run came from.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from .._io import LEDGER_MANIFEST
from ..audits import wilson_interval
from ..config import Config, load_config
from ..errors import BadInputError
from ..ingest import import_jsonl, import_logs
from ..resample import Resampling, scale_budget
from ..scoring import score_ledger
from ..stats.premiums import PremiumTable, lookup_premium, resolve_premiums
from ..store import Ledger, TokenizerMismatchError, check_token_ids, resolve_tokenizers
from ..tasks.roles import record_tasks
from ..tokenization.load import ResolvedTokenizer, load_tokenizer

#: what a run may be: a harness's logs (``--from`` of ``ledger import``), JSON lines, or a ledger folder
SOURCES = ("lm-eval", "inspect", "lighteval", "jsonl", "ledger")
#: the language premiums are measured against; its own premium is 1
REF = "eng_Latn"
#: the columns a lighteval details file holds
_LIGHTEVAL_COLUMNS = {"doc", "model_response"}


@dataclass(frozen=True)
class CheckCell:
    """One model, task, arm, language and cap of a run: how its cap bound it (shares are fractions in [0, 1])."""

    model: str
    task: str
    arm: str
    lang: str
    cap: int
    records: int
    #: traces cut by the cap (finish reason ``length``), completed (``stop``), and of unknown cut status
    cut: int
    completed: int
    unknown: int
    #: cut / records; ``None`` when some trace's cut status is unknown (then only the bounds below hold)
    cut_share: float | None
    cut_share_low: float
    cut_share_high: float
    #: Wilson interval of the cut share at the run check's level (with unknown traces: low of the lower bound,
    #: high of the upper bound)
    ci_low: float
    ci_high: float
    #: strict accuracy at the cap of completed, cut and unknown traces (``None`` where there are none)
    acc_completed: float | None
    acc_cut: float | None
    acc_unknown: float | None
    #: accuracy at the cap of all the cell's traces
    accuracy: float
    #: share of traces the strict parser reads no answer from within the cap
    never_answered: float
    #: the most a higher cap could add to the accuracy: the share of traces cut or possibly cut, wrong at the cap
    max_gain: float
    #: the language's token premium (1 for English) and the premium-scaled cap floor(r·cap)
    premium: float
    rerun_cap: int
    #: the harness's own name of the task (``mgsm_native_cot_de``), where the records carry one
    harness_task: str | None = None

    def as_dict(self) -> dict:
        """Plain data (strict-JSON ready)."""
        return asdict(self)


@dataclass(frozen=True)
class RunCheck:
    """The check of one run: where it came from, its cells, and the snippet to rerun it at premium-scaled caps."""

    source: str
    paths: tuple[str, ...]
    tokenizer: str | None
    level: float
    #: where the premiums came from (``FLORES-200 devtest, tokenizer qwen3-8b``, or the specs given)
    premiums: str
    cells: tuple[CheckCell, ...]
    #: lines to paste into the harness's command or config (comments start with ``#``)
    snippet: str
    #: the ledger the run was imported into, where it was kept (``ledger_out``, or a ledger given)
    ledger: str | None = None
    parser: str = "strict"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def binding(self, threshold: float) -> list[CheckCell]:
        """The cells whose cut share exceeds ``threshold`` (for cells with unknown traces: whose known cut share,
        the lower bound, does)."""
        return [c for c in self.cells if c.cut_share_low > threshold]

    def undecided(self, threshold: float) -> list[CheckCell]:
        """The cells whose cut share may exceed ``threshold`` but cannot be told to (unknown traces)."""
        return [c for c in self.cells if c.cut_share_low <= threshold < c.cut_share_high]

    def as_dict(self) -> dict:
        """Plain data (strict-JSON ready)."""
        out = asdict(self)
        out["paths"] = list(self.paths)
        out["notes"] = list(self.notes)
        out["cells"] = [c.as_dict() for c in self.cells]
        return out


# -- the format of a run ----------------------------------------------------------------------------------------
def _parquet_kind(path: Path) -> str:
    """``lighteval`` for a lighteval details file, else a one-line error saying what it is not."""
    try:
        names = set(pq.read_schema(path).names)
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable Parquet file ({exc})") from exc
    if not names >= _LIGHTEVAL_COLUMNS:
        shard = " (a ledger's shard? give the ledger's folder)" if "output_ids" in names else ""
        raise BadInputError(
            f"{path}: a Parquet file that is not a lighteval details file (no doc and model_response columns){shard}"
        )
    return "lighteval"


def _head(path: Path, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _file_kind(path: Path, *, given: bool) -> str | None:
    """The source a file belongs to (``None``: a file no run format names, such as a results file or a README).
    A file named on the command line (``given``) is sniffed harder than one found in a folder."""
    name = path.name
    if name.startswith("samples_") and name.endswith(".jsonl"):
        return "lm-eval"
    if name.endswith(".eval"):
        return "inspect"
    if name.endswith(".parquet"):
        return _parquet_kind(path)
    if name.endswith(".json"):
        if name.startswith("results_"):  # lm-eval's and lighteval's run summary, beside their samples
            return None
        head = _head(path)
        return "inspect" if b'"status"' in head and b'"eval"' in head else None
    if name.endswith(".jsonl"):
        first = _head(path).split(b"\n", 1)[0]
        return "lm-eval" if given and b'"doc_id"' in first and b'"resps"' in first else "jsonl"
    return None


def detect_source(paths: Sequence[str | os.PathLike[str]]) -> str:
    """What ``paths`` hold: one of :data:`SOURCES`, by the files' names and first bytes. A folder holding a
    ledger manifest is a ledger; any other folder is searched for run files. Files of two formats, a Parquet
    file that is not lighteval's, or nothing recognisable is a one-line error."""
    if not paths:
        raise BadInputError("no run given: name its log files or folders, or a ledger folder")
    found: dict[str, str] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            if (path / LEDGER_MANIFEST).exists():
                found.setdefault("ledger", str(path))
                continue
            inside = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            kinds = {p: _file_kind(p, given=False) for p in inside}
            for p, kind in kinds.items():
                if kind is not None:
                    found.setdefault(kind, str(p))
            if not any(kinds.values()):
                raise BadInputError(
                    f"{path}: cannot detect a run in this folder (no lm-eval samples_*.jsonl, inspect log, lighteval "
                    "details_*.parquet or JSON lines); name its format with --from"
                )
        elif path.is_file():
            kind = _file_kind(path, given=True)
            if kind is None:
                raise BadInputError(
                    f"{path}: cannot detect the format of this file (an lm-eval samples_*.jsonl, an inspect .eval or "
                    ".json log, a lighteval details .parquet or mindcap-tok JSON lines); name it with --from"
                )
            found.setdefault(kind, str(path))
        else:
            raise BadInputError(f"{path}: no such file or folder")
    if len(found) > 1:
        shown = "; ".join(f"{kind} ({where})" for kind, where in sorted(found.items()))
        raise BadInputError(f"the run mixes formats: {shown}; check one run at a time, or name the format with --from")
    (kind,) = found
    return kind


# -- the check --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _ledger_for(
    paths: Sequence[str | os.PathLike[str]],
    source: str,
    tok: ResolvedTokenizer | None,
    *,
    ledger_out: str | os.PathLike[str] | None,
    tasks: Sequence[str | os.PathLike[str]],
    tokenizers_dir: str | os.PathLike[str] | None,
) -> Iterator[Ledger]:
    """The run as a ledger: the given one, or the run imported into ``ledger_out`` or a temporary folder."""
    if source == "ledger":
        if len(paths) != 1:
            raise BadInputError("a ledger is checked alone: give one ledger folder")
        if ledger_out is not None:
            raise BadInputError("--ledger-out keeps an imported run; a ledger given is already kept")
        yield Ledger(paths[0])
        return
    if source == "jsonl" and len(paths) != 1:
        raise BadInputError("JSON lines are checked one file at a time; give a single file")
    if source != "jsonl" and tok is None:
        raise BadInputError(f"checking {source} logs needs the model's tokenizer (--tokenizer)")
    if ledger_out is not None and Ledger(ledger_out).exists():
        raise BadInputError(f"{ledger_out} already holds a ledger; --ledger-out takes a new or empty folder")
    with contextlib.ExitStack() as stack:
        root = Path(ledger_out) if ledger_out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        led = Ledger(root / "ledger" if ledger_out is None else root)
        if source == "jsonl":
            import_jsonl(paths[0], led, tokenizer=tok, tokenizers_dir=tokenizers_dir)
        else:
            assert tok is not None  # checked above
            import_logs(paths, led, source=source, tokenizer=tok, tasks=tasks)
        yield led


def _premium_table(
    specs: Sequence[str],
    tok: ResolvedTokenizer | None,
    models: list[str],
    langs: list[str],
    *,
    tokenizers_dir: str | os.PathLike[str] | None,
    data_dir: str | os.PathLike[str] | None,
) -> tuple[PremiumTable, str]:
    """Premiums of the run's languages and where they came from: the specs given, else the run's tokenizer's
    FLORES-200 devtest premiums, else (a ledger checked without a tokenizer) each model's own tokenizer's."""
    others = [lang for lang in langs if lang != REF]
    if not others:
        return {}, "none needed (English only)"
    if specs:
        table = resolve_premiums(specs, models, languages=others, tokenizers_dir=tokenizers_dir, data_dir=data_dir)
        return table, ", ".join(specs)
    if tok is None:
        table = resolve_premiums((), models, languages=others, tokenizers_dir=tokenizers_dir, data_dir=data_dir)
        return table, "FLORES-200 devtest, each model's own tokenizer"
    from ..data.flores import flores_source
    from ..premium import PremiumText, token_premium

    rows = token_premium(
        tok, others, source=flores_source(data_dir), text=PremiumText(ref=REF), resampling=Resampling(n_boot=0)
    )
    return {(None, row.lang): row.ratio for row in rows}, f"FLORES-200 devtest, tokenizer {tok.name}"


def _share(k: int, n: int) -> float:
    return k / n if n else 0.0


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def check_run(
    paths: Sequence[str | os.PathLike[str]],
    *,
    tokenizer: str | ResolvedTokenizer | None = None,
    source: str | None = None,
    premiums: Sequence[str] = (),
    tasks: Sequence[str | os.PathLike[str]] = (),
    level: float = 0.95,
    ledger_out: str | os.PathLike[str] | None = None,
    config: Config | None = None,
) -> RunCheck:
    """Check the run at ``paths`` (see the module docs): how much its cap bound each cell, and the caps to rerun it
    with.

    ``tokenizer``: the model's (required for harness logs; for a ledger it replaces the one each record names and
    must match the ledger's recorded hash). ``source``: one of :data:`SOURCES`, else detected. ``premiums``: premium
    specs as ``sweep --premiums`` takes them (``lang=r``, a ``premium --format json`` file, a tokenizer name);
    default: the tokenizer's FLORES-200 devtest premiums. ``tasks``: task files of tasks not built in. ``level``:
    of the Wilson intervals. Nothing is written unless ``ledger_out`` names a new folder to keep the imported
    ledger in. ``config``: where tokenizers and FLORES are (default: :func:`~mindcap_tok.config.load_config`).
    Bad input (an undetectable or mixed format, a tokenizer that does not match the run) is one
    :class:`~mindcap_tok.errors.BadInputError` line.
    """
    if not 0 < level < 1:
        raise BadInputError(f"level must be in (0, 1), got {level}")
    config = config or load_config()
    tokenizers_dir, data_dir = config.tokenizers_dir.value, config.data_dir.value
    kind = source or detect_source(paths)
    if kind not in SOURCES:
        raise BadInputError(f"unknown run format {kind!r}; use one of {', '.join(SOURCES)}")
    tok = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    with _ledger_for(paths, kind, tok, ledger_out=ledger_out, tasks=tasks, tokenizers_dir=tokenizers_dir) as led:
        table = led.read()
        kept = str(led.root) if (kind == "ledger" or ledger_out is not None) else None
    if table.num_rows == 0:
        raise BadInputError(f"{', '.join(map(str, paths))}: the run holds no records")
    names = table.column("tokenizer").to_pylist()
    try:
        toks = resolve_tokenizers(names, led if kind == "ledger" else None, override=tok, tokenizers_dir=tokenizers_dir)
    except TokenizerMismatchError as exc:
        raise BadInputError(
            f"{led.root}: the ledger's ids belong to tokenizer {exc.name!r} (sha256 {exc.recorded[:12]}…), not to "
            f"{exc.used} (sha256 {exc.actual[:12]}…); give the run's own tokenizer (--tokenizer)"
        ) from exc
    check_token_ids(table, {name: t.vocab_size for name, t in toks.items()})
    caps = np.asarray(table.column("cap").to_numpy(), dtype=np.int64)
    # scored from the ids alone: without the texts the scorer skips each trace's failure category, not needed here
    ids_only = table.drop_columns([c for c in ("text", "prompt", "prompt_ids") if c in table.column_names])
    score, emitted = np.zeros(table.num_rows, bool), np.zeros(table.num_rows, bool)
    for cap in np.unique(caps):  # each record at its own cap only
        rows = np.flatnonzero(caps == cap)
        part = score_ledger(ids_only.take(rows), toks, budgets=[int(cap)], parser="strict", tasks=tasks).by_budget
        score[rows], emitted[rows] = part["score"].to_numpy().astype(bool), part["emitted"].to_numpy().astype(bool)
    finish = np.asarray(table.column("finish_reason").to_pylist(), dtype=object)
    cut, unknown = finish == "length", finish == "unknown"
    models = np.asarray(table.column("model").to_pylist(), dtype=object)
    arms = np.asarray(table.column("arm").to_pylist(), dtype=object)
    langs = np.asarray(table.column("lang").to_pylist(), dtype=object)
    task_names = record_tasks(table)
    templates = (
        table.column("template_id").to_pylist() if "template_id" in table.column_names else [None] * table.num_rows
    )
    table_r, said = _premium_table(
        premiums,
        tok,
        sorted(set(models)),
        sorted(set(langs)),
        tokenizers_dir=tokenizers_dir,
        data_dir=data_dir,
    )
    keys = list(zip(models, task_names, arms, langs, caps.tolist(), strict=True))
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    cells = []
    for (model, task, arm, lang, cap), members in sorted(groups.items()):
        idx = np.asarray(members)
        n, k, u = len(idx), int(cut[idx].sum()), int(unknown[idx].sum())
        done = ~cut[idx] & ~unknown[idx]
        low, high = wilson_interval(k, n, level=level)[0], wilson_interval(k + u, n, level=level)[1]
        r = Fraction(1) if lang == REF else lookup_premium(table_r, model, lang=lang)
        harness = next((t for t in (templates[i] for i in idx) if t and ":" in t), None)
        cells.append(
            CheckCell(
                model=str(model),
                task=str(task),
                arm=str(arm),
                lang=str(lang),
                cap=int(cap),
                records=n,
                cut=k,
                completed=int(done.sum()),
                unknown=u,
                cut_share=None if u else _share(k, n),
                cut_share_low=_share(k, n),
                cut_share_high=_share(k + u, n),
                ci_low=float(low or 0.0),
                ci_high=float(high if high is not None else 1.0),
                acc_completed=_mean(score[idx][done]),
                acc_cut=_mean(score[idx][cut[idx]]),
                acc_unknown=_mean(score[idx][unknown[idx]]),
                accuracy=float(score[idx].mean()),
                never_answered=float((~emitted[idx]).mean()),
                max_gain=_share(int(((cut[idx] | unknown[idx]) & ~score[idx]).sum()), n),
                premium=float(r),
                rerun_cap=scale_budget(r, int(cap)),
                harness_task=harness.partition(":")[2] if harness else None,
            )
        )
    return RunCheck(
        source=kind,
        paths=tuple(str(p) for p in paths),
        tokenizer=None if tok is None else tok.name,
        level=level,
        premiums=said,
        cells=tuple(cells),
        snippet=rerun_snippet(kind, cells),
        ledger=kept,
        notes=_notes(cells),
    )


def _notes(cells: Sequence[CheckCell]) -> tuple[str, ...]:
    """What a reader of the cells must know: traces of unknown cut status, and what the rerun caps mean."""
    notes = []
    unknown = sum(c.unknown for c in cells)
    if unknown:
        notes.append(
            f"{unknown} traces have an unknown cut status (the log holds only part of the output, or no finish "
            "reason): their cells' cut shares are bounds"
        )
    return tuple(notes)


# -- the snippet to rerun with ----------------------------------------------------------------------------------
def _by_cap(cells: Sequence[CheckCell], name) -> dict[int, list[str]]:
    """The harness names (``name(cell)``) of the cells, grouped by the cap to rerun them with."""
    out: dict[int, list[str]] = {}
    for c in cells:
        names = out.setdefault(c.rerun_cap, [])
        if name(c) not in names:
            names.append(name(c))
    return dict(sorted(out.items()))


def rerun_snippet(source: str, cells: Sequence[CheckCell]) -> str:
    """Lines to paste into the command or config of the harness the run came from, one per premium-scaled cap."""

    def who(c: CheckCell) -> str:
        return f"{c.task} {c.arm} {c.lang}"

    if source == "lm-eval":
        groups = _by_cap(cells, lambda c: c.harness_task or f"<lm-eval task of {who(c)}>")
        lines = ["# lm-eval: each task at its premium-scaled cap (or generation_kwargs: {max_gen_toks: N} in its YAML)"]
        lines += [f"lm_eval ... --tasks {','.join(t)} --gen_kwargs max_gen_toks={cap}" for cap, t in groups.items()]
    elif source == "inspect":
        groups = _by_cap(cells, lambda c: f"<task of {who(c)}>")
        lines = ["# inspect: each language's task at its premium-scaled cap"]
        lines += [f"inspect eval {' '.join(t)} --max-tokens {cap}" for cap, t in groups.items()]
    elif source == "lighteval":
        groups = _by_cap(cells, lambda c: c.harness_task or f"<lighteval task of {who(c)}>")
        lines = ["# lighteval: each task's generation_size (its LightevalTaskConfig) at its premium-scaled cap"]
        lines += [f"generation_size={cap}  # {', '.join(t)}" for cap, t in groups.items()]
    else:
        groups = _by_cap(cells, who)
        lines = ["# mindcap-tok generate: a job spec's caps, per language"]
        lines += [f"caps = [{cap}]  # {', '.join(t)}" for cap, t in groups.items()]
    return "\n".join(lines) + "\n"
