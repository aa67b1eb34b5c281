"""The round-trip report's page (``report.html``): every chain hop by hop beside each judge's verdict and issues,
the report's figures and tables, in one self-contained file (:mod:`mindcap_tok.report.folder_page`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..report import FolderPage, render_folder_page
from .store import MANIFEST, RunStore, check_manifest

if TYPE_CHECKING:
    import pandas as pd


class ReportContent(Protocol):
    """What the page reads of a :class:`~mindcap_tok.roundtrip.report.RoundtripReport` (named here, not
    imported: the report module writes the page)."""

    @property
    def tables(self) -> dict[str, pd.DataFrame]: ...
    @property
    def samples(self) -> pd.DataFrame: ...
    @property
    def hops(self) -> pd.DataFrame: ...
    @property
    def summary(self) -> dict: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def sources(self) -> dict[str, str]: ...


#: the page's file name in a round-trip report folder
PAGE = "report.html"
_VERDICT = ("status", "classification", "mqm", "passed", "inconsistent", "back_translation")


def _shown(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return str(value)


def judge_issues(run_dir: str | Path) -> dict[tuple[str, str, str, str], list[str]]:
    """(model, text id, sequence, judge) -> the issues of the judge's last parsed reply, one line each
    (``severity: description``, the judge prompt's fields), read from the run's committed judge files."""
    root = Path(run_dir)
    manifest = check_manifest(json.loads((root / MANIFEST).read_text("utf-8")), root / MANIFEST)
    store = RunStore(root, manifest["identity"], manifest["spec"])
    out: dict[tuple[str, str, str, str], list[str]] = {}
    for row in store.read_all("judge/"):
        if row["issues"] is None:
            continue
        lines = []
        for issue in json.loads(row["issues"]):
            if isinstance(issue, dict):
                head = " · ".join(str(issue[k]) for k in ("severity", "category") if issue.get(k))
                body = next((str(issue[k]) for k in ("description", "span", "text") if issue.get(k)), "")
                lines.append(f"{head}: {body}" if head and body else head or body or json.dumps(issue))
            else:
                lines.append(str(issue))
        out[(row["model"], row["text_id"], row["sequence"], row["judge_model"])] = lines
    return out


def roundtrip_page(report: ReportContent, figures: Mapping[str, bytes]) -> str:
    """The page of ``report`` (:func:`~mindcap_tok.roundtrip.report.build_roundtrip_report`) with ``figures``
    (file name -> PNG bytes) inlined."""
    summary, hops, samples = report.summary, report.hops, report.samples
    issues = judge_issues(summary["run_dir"])
    chains = []
    for (model, text_id, sequence), part in hops.groupby(["model", "text_id", "sequence"], sort=True):
        part = part.sort_values("hop")
        judged = samples[samples["model"].eq(model) & samples["text_id"].eq(text_id) & samples["sequence"].eq(sequence)]
        chains.append(
            {
                "title": f"{model} · {text_id} · {sequence}",
                "source_lang": part["src_lang"].iloc[0],
                "source": report.sources.get(str(text_id)),
                "hops": [
                    {
                        "hop": int(h["hop"]),
                        "src_lang": h["src_lang"],
                        "tgt_lang": h["tgt_lang"],
                        "tokens": _shown(h.get("output_tokens")),
                        "capped": bool(h["capped"]),
                        "empty": bool(h["empty"]),
                        "text": h["text"],
                    }
                    for h in part.to_dict("records")
                ],
                "judges": [
                    {
                        "judge": j["judge_model"],
                        "verdict": {k: _shown(j.get(k)) for k in _VERDICT if k in j},
                        "issues": issues.get((model, text_id, sequence, j["judge_model"]), []),
                    }
                    for j in judged.to_dict("records")
                ],
            }
        )
    settings = {
        k: _shown(v)
        for k, v in summary.items()
        if k not in ("run_dir", "judge_consistency", "agreement") and not isinstance(v, dict | list)
    }
    settings["run folder"] = Path(summary["run_dir"]).name
    page = FolderPage(
        title="Round-trip report" + (f": {summary['run']}" if summary.get("run") else ""),
        intro="Round-trip translation (LiT): each chain's hops and each judge's MQM verdict on the back-translation.",
        settings=settings,
        notes=tuple(report.notes),
        figures=dict(figures),
        tables={**report.tables, "samples": samples},
        chains=chains,
    )
    return render_folder_page(page)
