"""A leaderboard across round-trip runs, and its agreement with an outside ranking (LiT Figure 1).

From finished run folders: every model's pass share, raw MQM and judge score per judge, overall and per sequence,
resource group and category, with the text-bootstrap SEs of :func:`~.metrics.roundtrip_metrics`; the models
ranked by overall pass share (rank 1 best, ties share the better rank); per model the share of bootstrap
replicates (texts resampled, the same draws for every model) in which it keeps its rank; and, given an outside
ranking (CSV ``model,score``, e.g. LMArena Elo), Spearman ρ between it and the pass shares with a one-sided
permutation p-value (:func:`~.agreement.rank_agreement`, seeded, the permutation count recorded).

Runs that used different texts, sequences or judges are refused unless ``allow_mixed``; the output then says
which differed. A model may appear in one run only (a thinking and an instruct entry of one model are two models,
distinct names); where some run has a thinking model the leaderboard says which entries think (``thinking``).
Outputs (one atomic folder): ``leaderboard.csv``,
``metrics.csv``, ``reference.csv`` (with a reference), ``compare.json`` (strict, shares as fractions),
``compare.md`` and the figures ``leaderboard.png`` and (with a reference) ``reference.png``, a panel per judge;
a judge with fewer than three models in both says so in its panel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import output_folder, regular_file
from .._json import dumps_strict
from .._tables import markdown_table
from ..errors import BadInputError
from ..resample import bootstrap_counts
from .agreement import MIN_MODELS, N_PERM, rank_agreement
from .metrics import N_BOOT, roundtrip_metrics
from .plots import plot_leaderboard, plot_reference
from .report import check_outside_runs, inside_folder, read_run

PRODUCER = "mindcap-tok roundtrip compare"
#: what runs must share to be compared (identity keys)
_SHARED = {"texts": "texts", "sequences": "sequences", "judge": "judges"}


@dataclass(frozen=True)
class CompareOptions:
    """Settings of :func:`compare_runs`: bootstrap resamples, permutations, their seed, whether runs that used
    different texts, sequences or judges may be compared, and the data folder their texts reload from."""

    n_boot: int = N_BOOT
    n_perm: int = N_PERM
    seed: int = 0
    allow_mixed: bool = False
    data_dir: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class CompareResult:
    """What :func:`compare_runs` wrote and the tables behind it."""

    out_dir: Path
    files: tuple[str, ...]
    leaderboard: pd.DataFrame
    metrics: pd.DataFrame
    reference: pd.DataFrame
    summary: dict


def _mixed(manifests: Sequence[dict]) -> list[str]:
    """The shared identity parts (texts, sequences, judges) in which the runs differ."""
    first = manifests[0]["identity"]
    return [name for key, name in _SHARED.items() if any(m["identity"].get(key) != first.get(key) for m in manifests)]


def _samples(run_dirs: Sequence[str | os.PathLike[str]], opts: CompareOptions) -> tuple[pd.DataFrame, list[str]]:
    """Every run's samples (column ``run``) and the parts they differ in; a model in two runs is refused."""
    if not run_dirs:
        raise BadInputError("give at least one round-trip run folder to compare")
    data = [read_run(r, None, opts.data_dir) for r in run_dirs]
    mixed = _mixed([d.manifest for d in data])
    if mixed and not opts.allow_mixed:
        raise BadInputError(
            f"the runs used different {', '.join(mixed)}; give --allow-mixed (allow_mixed) to compare them anyway"
        )
    seen: dict[str, str] = {}
    frames = []
    for run, d in zip(run_dirs, data, strict=True):
        for model in d.samples["model"].unique():
            if model in seen:
                raise BadInputError(f"model {model!r} is in two runs ({seen[model]} and {run}); compare it once")
            seen[model] = str(run)
        thinking = {m["name"]: bool(m.get("thinking")) for m in d.manifest["spec"]["models"]}
        frames.append(d.samples.assign(run=str(run), thinking=d.samples["model"].map(thinking)))
    return pd.concat(frames, ignore_index=True), mixed


def _by_model(samples: pd.DataFrame) -> dict[str, bool]:
    return dict(zip(samples["model"], samples["thinking"].astype(bool), strict=True))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest; ties share the better rank."""
    from scipy.stats import rankdata

    return rankdata(-values, method="min", axis=-1).astype(int)


def rank_stability(samples: pd.DataFrame, *, n_boot: int, seed: int) -> pd.Series:
    """Per model (one judge's samples): the share of text-bootstrap replicates in which the model has the rank its
    overall pass share gives it. Texts are those every model has a value for; each text's pass is first averaged
    over its sequences, and every replicate draws the same texts for all models."""
    scored = samples[samples["status"] != "unjudged"]
    per_text = scored.assign(passed=scored["passed"].astype(float)).pivot_table(
        index="model", columns="text_id", values="passed", aggfunc="mean"
    )
    per_text = per_text.dropna(axis=1)
    n = per_text.shape[1]
    if n == 0 or len(per_text) < 2:
        return pd.Series(np.nan, index=per_text.index)
    values = per_text.to_numpy()
    observed = _ranks(values.mean(axis=1))
    boot = bootstrap_counts(n, n_boot, seed=seed) @ values.T / n  # (n_boot, models)
    return pd.Series((_ranks(boot) == observed).mean(axis=0), index=per_text.index)


def read_reference(path: str | os.PathLike[str]) -> pd.DataFrame:
    """An outside ranking: a CSV with columns ``model`` and ``score`` (higher is better), one row per model."""
    try:
        frame = pd.read_csv(regular_file(path, "reference ranking"))
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot read reference ranking {path}: {exc}") from exc
    missing = {"model", "score"} - set(frame.columns)
    if missing:
        raise BadInputError(f"reference ranking {path} lacks the column(s) {', '.join(sorted(missing))} (model,score)")
    scores = pd.to_numeric(frame["score"], errors="coerce")
    if not np.isfinite(scores.astype(float)).all():
        bad = frame.loc[~np.isfinite(scores.astype(float)), "model"].astype(str).tolist()
        raise BadInputError(f"reference ranking {path}: score is not a finite number for {', '.join(bad)}")
    if frame["model"].duplicated().any():
        raise BadInputError(
            f"reference ranking {path} lists {frame['model'][frame['model'].duplicated()].iloc[0]} twice"
        )
    return pd.DataFrame({"model": frame["model"].astype(str), "score": scores.astype(float)})


def _leaderboard(metrics: pd.DataFrame, samples: pd.DataFrame, opts: CompareOptions) -> pd.DataFrame:
    over = metrics[metrics["by"] == "overall"].drop(columns=["by", "group"])
    parts = []
    for judge, g in over.groupby("judge_model", sort=False):
        g = g.sort_values("pass_share", ascending=False, kind="stable").copy()
        g.insert(0, "rank", _ranks(g["pass_share"].astype(float).to_numpy()))
        stay = rank_stability(samples[samples["judge_model"] == judge], n_boot=opts.n_boot, seed=opts.seed)
        g["rank_kept_share"] = g["model"].map(stay)
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def _against(leaderboard: pd.DataFrame, reference: pd.DataFrame, opts: CompareOptions) -> tuple[pd.DataFrame, list]:
    """Per judge: Spearman ρ of pass share against the reference score over the models both have."""
    rows, notes = [], []
    for judge, g in leaderboard.groupby("judge_model", sort=False):
        both = g.merge(reference, on="model").dropna(subset=["pass_share"])
        left = sorted(set(g["model"]) - set(reference["model"]))
        if left:
            notes.append(f"not in the reference ranking (left out): {', '.join(left)}")
        if len(both) < MIN_MODELS:
            notes.append(f"reference agreement of {judge} skipped: needs at least {MIN_MODELS} models in both")
            continue
        got = rank_agreement(both["pass_share"], both["score"], n_perm=opts.n_perm, seed=opts.seed)
        rows.append(
            {
                "judge_model": judge,
                "metric": "pass_share",
                "n_models": got["n"],
                "rho": got["rho"],
                "p_one_sided": got["rho_p"],
                "n_permutations": got["n_permutations"],
                "seed": opts.seed,
            }
        )
    return pd.DataFrame(rows), sorted(set(notes))


def compare_runs(
    *,
    run_dirs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    reference: str | os.PathLike[str] | None = None,
    options: CompareOptions = CompareOptions(),
) -> CompareResult:
    """Write the leaderboard of the models in ``run_dirs`` into ``out_dir`` (see the module docs); ``reference``:
    a CSV of an outside ranking (``model,score``)."""
    out = Path(out_dir)
    for run in run_dirs:
        if inside_folder(out, Path(run)) or inside_folder(Path(run), out):
            raise BadInputError(f"write the comparison outside the run folder {run} (and not around it)")
    check_outside_runs(out)
    ref = read_reference(reference) if reference is not None else None
    samples, mixed = _samples(run_dirs, options)
    metrics = roundtrip_metrics(samples, n_boot=options.n_boot, seed=options.seed)
    board = _leaderboard(metrics, samples, options)
    if samples["thinking"].any():  # reasoning models: which entry thinks (leaderboards without one unchanged)
        board.insert(board.columns.get_loc("model") + 1, "thinking", board["model"].map(_by_model(samples)))
    against, notes = _against(board, ref, options) if ref is not None else (pd.DataFrame(), [])
    summary = {
        "format": PRODUCER,
        "runs": [str(r) for r in run_dirs],
        "mixed": mixed,
        "models": int(board["model"].nunique()),
        "bootstrap": {"n_boot": options.n_boot, "seed": options.seed, "unit": "text"},
        "reference": None
        if reference is None
        else {"file": os.path.basename(str(reference)), "alternative": "greater", "n_permutations": options.n_perm},
    }
    files = ["leaderboard.csv", "metrics.csv", "compare.json", "compare.md", "leaderboard.png"]
    with output_folder(out, PRODUCER) as tmp:
        board.to_csv(tmp / "leaderboard.csv", index=False)
        metrics.to_csv(tmp / "metrics.csv", index=False)
        plot_leaderboard(board, tmp / "leaderboard.png")
        if ref is not None:
            against.to_csv(tmp / "reference.csv", index=False)
            plot_reference(board, ref, against, tmp / "reference.png")  # too few models: it says so
            files += ["reference.csv", "reference.png"]
        payload = {
            **summary,
            "leaderboard": board.to_dict("records"),
            "metrics": metrics.to_dict("records"),
            "against_reference": against.to_dict("records"),
            "notes": notes,
            "files": sorted(files),
        }
        (tmp / "compare.json").write_text(dumps_strict(payload) + "\n", "utf-8")
        (tmp / "compare.md").write_text(_markdown(summary, board, metrics, against, notes), "utf-8")
    return CompareResult(out, tuple(sorted(files)), board, metrics, against, {**summary, "notes": notes})


def _md(frame: pd.DataFrame, fmt: str = ".4f") -> str:
    return markdown_table(frame, fmt) if len(frame) else "_none_"


def _markdown(summary: dict, board, metrics, against, notes: list[str]) -> str:
    b = summary["bootstrap"]
    parts = [
        "# Round-trip comparison",
        "",
        f"Runs: {', '.join(f'`{r}`' for r in summary['runs'])}. Rank by overall pass share (MQM ≥ 80; shares are "
        f"fractions in [0, 1], MQM and judge scores on 0–100, MQM raw). SEs and `rank_kept_share`: bootstrap over "
        f"texts ({b['n_boot']} resamples, seed {b['seed']}).",
        "",
    ]
    if summary["mixed"]:
        parts += [f"**Mixed runs**: they used different {', '.join(summary['mixed'])} (compared as asked).", ""]
    parts += ["## Leaderboard", "", _md(board), ""]
    for by, title in (
        ("sequence", "Per sequence"),
        ("resource", "Per resource group"),
        ("category", "Per category"),
        ("subcategory", "Per subcategory"),
    ):
        parts += [f"## {title}", "", _md(metrics[metrics["by"] == by]), ""]
    if summary["reference"]:
        r = summary["reference"]
        parts += [
            "## Against the reference ranking",
            "",
            f"`{r['file']}`: Spearman ρ of pass share against the reference score, one-sided permutation "
            f"p-value (at most {r['n_permutations']} permutations, exact when n! is fewer).",
            "",
            _md(against),
            "",
        ]
    if notes:
        parts += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(parts)
