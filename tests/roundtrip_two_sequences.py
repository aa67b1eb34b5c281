"""A hand-built round-trip run folder (records written with the run store's own writer, real Qwen3 token ids):
3 English texts through German and French and back, with known hop outputs, cap hits and judge MQM scores."""

from __future__ import annotations

import json
from pathlib import Path

from mindcap_tok.roundtrip import parse_spec
from mindcap_tok.roundtrip.store import HOP_SCHEMA, JUDGE_SCHEMA, RunStore, hop_file, judge_file

SOURCES = {
    "t1": ("The weather is beautiful today and we are going to the park.", "stem"),
    "t2": ("My brother works as a teacher in a small school near the river.", "informal"),
    "t3": ("Please close the door when you leave the house in the morning.", "informal"),
}
PIVOT = {  # hop-1 outputs; t3's French hop wrongly stays in English
    "deu_Latn": {
        "t1": "Das Wetter ist heute wunderschön und wir gehen in den Park.",
        "t2": "Mein Bruder arbeitet als Lehrer an einer kleinen Schule in der Nähe des Flusses.",
        "t3": "Bitte schließe die Tür, wenn du morgens das Haus verlässt.",
    },
    "fra_Latn": {
        "t1": "Il fait très beau aujourd'hui et nous allons au parc.",
        "t2": "Mon frère travaille comme professeur dans une petite école près de la rivière.",
        "t3": "Please close the door when you leave the house in the morning.",
    },
}
BACK = {  # hop-2 outputs (back in English); t3 via French is empty: a failed chain
    "deu_Latn": {
        "t1": "The weather is wonderful today and we go to the park.",
        "t2": "My brother works as a teacher at a small school near the river.",
        "t3": "Please shut the door when you leave the house in the morning.",
    },
    "fra_Latn": {
        "t1": "The weather is very nice today and we are going to the park.",
        "t2": "My brother works as a professor in a little school close to the river.",
        "t3": "",
    },
}
MQM = {"deu_Latn": {"t1": 100.0, "t2": 94.0, "t3": 79.0}, "fra_Latn": {"t1": 80.0, "t2": 50.0}}
ISSUES = {100.0: (0, 0, 0), 94.0: (6, 0, 0), 79.0: (1, 4, 0), 80.0: (0, 4, 0), 50.0: (0, 0, 2)}  # (minor, major,
# critical) behind each MQM above: the report recomputes MQM from the counts
CAPPED = {("t2", "deu_Latn", 1)}
SEQ = {lang: f"eng_Latn>{lang}>eng_Latn" for lang in ("deu_Latn", "fra_Latn")}


def write_two_sequence_run(tmp_path: Path, qwen) -> Path:
    """A finished run of qwen3-8b over 3 texts × 2 sequences in ``tmp_path/run``, written through
    :class:`RunStore`."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text(
        "".join(json.dumps({"id": k, "text": t, "category": c}) + "\n" for k, (t, c) in SOURCES.items()), "utf-8"
    )
    spec = parse_spec(
        {
            "model": "qwen3-8b",
            "model_name": "qwen3-8b",
            "texts": str(texts),
            "max_tokens": 64,
            "sequences": ["en>de>en", "en>fr>en"],
            "seed": 5,
        }
    )
    store = RunStore(tmp_path / "run", spec.identity(), spec.as_dict())
    end = qwen.tokenizer.token_to_id("<|im_end|>")
    for hop, outputs in ((1, PIVOT), (2, BACK)):
        rows = []
        for lang, by_text in outputs.items():
            for tid, text in by_text.items():
                capped = (tid, lang, hop) in CAPPED
                ids = qwen.encode(text) + ([] if capped else [end])
                src, tgt = (("eng_Latn", lang), (lang, "eng_Latn"))[hop - 1]
                rows.append(
                    {
                        "model": "qwen3-8b",
                        "text_id": tid,
                        "sequence": SEQ[lang],
                        "hop": hop,
                        "src_lang": src,
                        "tgt_lang": tgt,
                        "seed": 1,
                        "cap": 64,
                        "template_id": "t",
                        "prompt_ids": [1, 2],
                        "output_ids": ids,
                        "text": text,
                        "finish_reason": "length" if capped else "stop",
                        "capped": capped,
                        "empty": not text.strip(),
                        "generator": "hand",
                    }
                )
        store.write(hop_file(hop), rows, HOP_SCHEMA)
    judged = []
    for lang, by_text in MQM.items():
        for tid, mqm in by_text.items():
            judged.append(
                {
                    "model": "qwen3-8b",
                    "text_id": tid,
                    "sequence": SEQ[lang],
                    "attempt": 0,
                    "judge_model": "qwen3-8b",
                    "seed": 1,
                    "cap": 64,
                    "template_id": "j",
                    "prompt_ids": [1],
                    "output_ids": [2],
                    "raw": "{}",
                    "finish_reason": "stop",
                    "parse": "strict",
                    "mqm": mqm,
                    "judge_score": mqm - 10,
                    "classification": "7-good",
                    "n_minor": ISSUES[mqm][0],
                    "n_major": ISSUES[mqm][1],
                    "n_critical": ISSUES[mqm][2],
                    "n_bad_severity": 0,
                    "issues": "[]",
                    "error": None,
                    "generator": "hand",
                }
            )
    store.write(judge_file(0), judged, JUDGE_SCHEMA)
    return tmp_path / "run"
