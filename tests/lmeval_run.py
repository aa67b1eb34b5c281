"""Run lm-evaluation-harness for real on a tiny model the tests build (the ``evals`` environment).

:func:`biased_tiny_model` saves the tests' tiny Qwen3 with its tied embedding biased so that greedy decoding
writes digits, words, ``####``, newlines and sometimes its end token (a purely random model writes no numbers
and never stops). :func:`local_mgsm_tasks` writes a local copy of lm-eval's ``mgsm_native_cot_<lang>`` task
files, read from the installed package (their filters, prompts and stop strings; ``max_gen_toks`` set), over
Parquet files in MGSM's schema. :func:`run_lm_eval` runs ``python -m lm_eval`` on them offline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tiny_model import build_tiny_model

#: items per language: MGSM-like word problems with their integer answers
ITEMS = [
    ("Janet has 16 eggs and eats 3. How many are left?", 13),
    ("A box holds 5 pens. How many pens are in 4 boxes?", 20),
    ("Tom had 40 marbles and gave away 14. How many does he have?", 26),
    ("Sara reads 3 pages a day. How many pages does she read in 3 days?", 9),
    ("A bus has 20 seats and 7 are empty. How many are taken?", 13),
    ("A farmer has 120 sheep and sells 45. How many remain?", 75),
    ("Each cake needs 3 eggs. How many eggs make 11 cakes?", 33),
    ("Lee saves 1,000 coins and spends 980. How many coins are left?", 20),
]


#: the logit bias of ``</think>`` after a number (:func:`biased_tiny_model` with ``think_close``)
THINK_CLOSE_BIAS = 30.0

#: a stop string added to the tasks' own: the model writes none of their question words, and " 8" begins what it
#: writes for some prompts only, so those generations stop (empty) and the others run to the cap
EXTRA_STOP = " 8"


def biased_tiny_model(folder: Path, seed: int = 0, *, think_close: bool = False) -> Path:
    """The tests' tiny model, biased to write numbers: its tied embedding gets a positive channel (hidden dim 0,
    which no layer writes) larger for digits, ``#``, spaces, newlines and a few words; the final norm flips the
    other channels (a tied random model's next token is its current one: now it is a dissimilar one), and the
    attention values are scaled up so that the prompt changes what follows. Greedy decoding then writes number
    sequences that differ between prompts. ``think_close``: the tokenizer holds Qwen3's ``<think>`` and
    ``</think>`` (one token each), and the generation config (which every ``generate`` call reads) biases
    ``</think>`` after a number, so that outputs close a thought, once or more, before they go on."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    build_tiny_model(folder, seed=seed, think_tokens=think_close)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    emb = model.get_input_embeddings().weight
    favoured = torch.zeros(emb.shape[0])
    for token in range(emb.shape[0]):
        # whole pre-token pieces only (a space, then digits or a word; "#" runs; newline), so that a generation
        # re-encodes to the ids it was sampled as and cap hits survive the import's re-encoding
        text = tok.decode([token])
        if re.fullmatch(r" [0-9]+|#+|\n", text):
            favoured[token] = 1.0
        elif text.lower() in (" the", " answer", " is", " step", " eggs", " left"):
            favoured[token] = 0.8
    with torch.no_grad():
        emb[:, 1:] *= 4
        noise = torch.rand(emb.shape[0], generator=torch.Generator().manual_seed(seed))
        emb[:, 0] = 1.0 + 0.3 * favoured + 0.15 * noise
        # special tokens other than the end token decode to nothing (lm-eval skips them): never write them
        emb[[tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>")], 0] = 0.0
        model.model.norm.weight[1:] = -1.0
        for layer in model.model.layers:
            layer.self_attn.v_proj.weight *= 10
            layer.mlp.down_proj.weight *= 10 / 3
            layer.self_attn.o_proj.weight[0, :] = 0  # channel 0 stays the embedding's
            layer.mlp.down_proj.weight[0, :] = 0
    model.save_pretrained(folder)
    if think_close:
        close = tok.convert_tokens_to_ids("</think>")
        numbers = [t for t in range(emb.shape[0]) if re.fullmatch(r" [0-9]+", tok.decode([t]))]
        config = GenerationConfig.from_pretrained(folder)
        config.sequence_bias = [[[t, close], THINK_CLOSE_BIAS] for t in numbers] + [[[close, close], -30.0]]
        config.save_pretrained(folder)
    return folder


def local_mgsm_tasks(folder: Path, langs: list[str], cap: int) -> Path:
    """lm-eval's ``mgsm_native_cot_<lang>`` files copied from the installed package, reading local Parquet data
    (MGSM's columns: question, answer null, answer_number, equation_solution), generating at most ``cap`` and
    also stopping at :data:`EXTRA_STOP`."""
    import lm_eval
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    source = Path(lm_eval.__file__).parent / "tasks" / "mgsm" / "native_cot"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cot_yaml").write_text((source / "cot_yaml").read_text("utf-8"), "utf-8")
    schema = pa.schema(
        [
            ("question", pa.string()),
            ("answer", pa.string()),
            ("answer_number", pa.int64()),
            ("equation_solution", pa.string()),
        ]
    )
    for lang in langs:
        table = pa.table(
            {
                "question": [q for q, _ in ITEMS],
                "answer": [None] * len(ITEMS),
                "answer_number": [a for _, a in ITEMS],
                "equation_solution": [None] * len(ITEMS),
            },
            schema=schema,
        )
        data = folder / f"mgsm_{lang}.parquet"
        pq.write_table(table, data)
        config = yaml.safe_load((source / f"mgsm_native_cot_{lang}.yaml").read_text("utf-8"))
        config.update(
            dataset_path="parquet",
            dataset_name=None,
            dataset_kwargs={"data_files": {"train": str(data), "test": str(data)}},
        )
        config["generation_kwargs"]["max_gen_toks"] = cap
        config["generation_kwargs"]["until"].append(EXTRA_STOP)
        (folder / f"mgsm_native_cot_{lang}.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    return folder


def run_lm_eval(
    model: Path, tasks_dir: Path, tasks: list[str], out: Path, limit: int, model_args: str = ""
) -> subprocess.CompletedProcess:
    """``python -m lm_eval --model hf ... --log_samples`` on CPU, offline; its output folder is ``out``;
    ``model_args``: more of them (``think_end_token=</think>``)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model},dtype=float32" + (f",{model_args}" if model_args else ""),
        "--tasks",
        ",".join(tasks),
        "--include_path",
        str(tasks_dir),
        "--limit",
        str(limit),
        "--batch_size",
        "8",
        "--device",
        "cpu",
        "--log_samples",
        "--output_path",
        str(out),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
