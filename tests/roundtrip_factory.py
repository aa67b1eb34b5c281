"""Hand-built round-trip run folders for report tests: records written with the run store's own writer, hop
outputs equal to their sources (real token ids), judge records with given classes and issue counts."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path

from mindcap_tok.roundtrip import mqm_score, parse_spec
from mindcap_tok.roundtrip.store import HOP_SCHEMA, JUDGE_SCHEMA, RunStore, hop_file, judge_file

SEQ = "eng_Latn>deu_Latn>eng_Latn"


def write_run(
    root: Path,
    tok,
    texts: Mapping[str, str] | None,
    judged: Mapping[tuple[str, str, str], tuple[str, int, int, int]],
    *,
    models: tuple[str, ...] = ("qwen3-8b",),
    judges: tuple[str, ...] = ("qwen3-8b",),
    source: dict | None = None,
    outputs: Mapping[tuple[int, str], str] | None = None,
    issues: Mapping[tuple[str, str, str], list] | None = None,
    capped: Collection[tuple[int, str]] = (),
) -> Path:
    """A finished ``en>de>en`` run of ``models`` over ``texts`` in ``root/run``; ``judged[(model, judge, text id)] =
    (classification, minor, major, critical)``. MQM is stored floored at 0, as runs before raw MQM stored it.
    ``source``: spec keys naming the texts instead (``texts = None``, e.g. FLORES); ``outputs[(hop, text id)]``:
    a hop's output (default: the source text); ``issues[(model, judge, text id)]``: the judge's issues (default
    none); ``capped``: the (hop, text id) pairs whose hop the cap cut (finish reason ``length``, no end-of-turn
    token)."""
    root.mkdir(parents=True, exist_ok=True)
    if texts is not None:
        path = root / "texts.jsonl"
        path.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in texts.items()), "utf-8")
        source = {"texts": str(path)}
    spec = parse_spec(
        {
            "model": list(models),
            "model_name": list(models),
            **source,
            "max_tokens": 64,
            "sequences": ["en>de>en"],
            "seed": 3,
            "judge": [{"model": j} for j in judges],
        }
    )
    texts = {t.id: t.text for t in spec.texts}
    outputs = outputs or {}
    store = RunStore(root / "run", spec.identity(), spec.as_dict())
    end = tok.tokenizer.token_to_id("<|im_end|>")
    for hop, (src, tgt) in ((1, ("eng_Latn", "deu_Latn")), (2, ("deu_Latn", "eng_Latn"))):
        rows = [
            {
                "model": m,
                "text_id": tid,
                "sequence": SEQ,
                "hop": hop,
                "src_lang": src,
                "tgt_lang": tgt,
                "seed": 1,
                "cap": 64,
                "template_id": "t",
                "prompt_ids": [1],
                "output_ids": [*tok.encode(outputs.get((hop, tid), t))] + ([] if (hop, tid) in capped else [end]),
                "text": outputs.get((hop, tid), t),
                "finish_reason": "length" if (hop, tid) in capped else "stop",
                "capped": (hop, tid) in capped,
                "empty": False,
                "generator": "hand",
            }
            for m in models
            for tid, t in texts.items()
        ]
        store.write(hop_file(hop), rows, HOP_SCHEMA)
    rows = [
        {
            "model": m,
            "text_id": tid,
            "sequence": SEQ,
            "attempt": 0,
            "judge_model": j,
            "seed": 1,
            "cap": 64,
            "template_id": "j",
            "prompt_ids": [1],
            "output_ids": [2],
            "raw": "{}",
            "finish_reason": "stop",
            "parse": "strict",
            "mqm": max(0.0, mqm_score(mi, ma, cr)),
            "judge_score": 50.0,
            "classification": cls,
            "n_minor": mi,
            "n_major": ma,
            "n_critical": cr,
            "n_bad_severity": 0,
            "issues": json.dumps((issues or {}).get((m, j, tid), [])),
            "error": None,
            "generator": "hand",
        }
        for (m, j, tid), (cls, mi, ma, cr) in judged.items()
    ]
    store.write(judge_file(0), rows, JUDGE_SCHEMA)
    return root / "run"
