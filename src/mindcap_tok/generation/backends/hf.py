"""The transformers backend: ``model.generate`` one request at a time, seeded per request (small CPU runs, tests).

A request is decoded as ``torch.manual_seed(seed)`` then ``generate(prompt, num_return_sequences=n,
max_new_tokens=cap)``, so a request's samples depend on its seed only, never on batching or order. A request's
``json_schema`` is not enforced (transformers has no constrained decoding built in); the round-trip judge reads
free replies tolerantly and retries those it cannot parse.
"""

from __future__ import annotations

from ...errors import BackendError, BadInputError, first_line
from .base import ChatTokenizer, Completion, GenRequest


def trim(ids: list[int], stops: set[int], *, max_tokens: int) -> Completion:
    """Cut a padded generated row after its first stop id; ``length`` when it has none."""
    for i, t in enumerate(ids[:max_tokens]):
        if t in stops:
            return Completion(tuple(ids[: i + 1]), "stop")
    return Completion(tuple(ids[:max_tokens]), "length")


class TransformersBackend:
    """Decode with a transformers causal LM on CPU; of the engine options only ``dtype`` applies (others: vLLM)."""

    name = "transformers"

    def __init__(self, model: str, tokenizer_name: str, engine: dict) -> None:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM

        self.version = transformers.__version__
        self.tok = ChatTokenizer(model, tokenizer_name)
        dtype = engine.get("dtype", "float32")
        if not isinstance(getattr(torch, str(dtype), None), torch.dtype):
            raise BadInputError(f"engine dtype {dtype!r} is not a torch dtype (e.g. float32, bfloat16)")
        try:
            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).eval()
        except Exception as exc:
            raise BackendError(f"cannot load the model {model!r}: {first_line(exc)}") from exc
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if self.tok.hf.eos_token_id is not None:
            eos.append(self.tok.hf.eos_token_id)
        self.eos = tuple(dict.fromkeys(eos))
        pad = self.tok.hf.pad_token_id
        self.pad = pad if pad is not None else self.eos[0]

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        """Decode every request (one ``generate`` call each, seeded by its own seed)."""
        import torch

        out = []
        for req in requests:
            stops = (*self.eos, *req.stop_ids)
            sampling = (
                # top_k -1 (the spec's "no top-k") is transformers' 0, which its TopKLogitsWarper would refuse
                {"do_sample": True, "temperature": req.temperature, "top_p": req.top_p, "top_k": max(req.top_k, 0)}
                if req.temperature > 0
                else {"do_sample": False}
            )
            ids = torch.tensor([req.prompt_ids])
            torch.manual_seed(req.seed)
            with torch.no_grad():
                gen = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=req.max_tokens,
                    num_return_sequences=req.n,
                    eos_token_id=list(stops),
                    pad_token_id=self.pad,
                    **sampling,
                )
            rows = gen[:, ids.shape[1] :].tolist()
            out.append([trim(row, set(stops), max_tokens=req.max_tokens) for row in rows])
        return out
