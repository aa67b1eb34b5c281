"""Generation: job specs, prompts, backends (in-process vLLM or transformers, any OpenAI-compatible server) and the
resumable run that appends a job's records to a ledger.

Other stages enter through this package; its modules are its own.
"""

from .backends import BACKENDS, ChatTokenizer, Completion, GenRequest, load_backend
from .generate import GenerateResult, JobHooks, dry_run, run_job
from .jobs import JobSpec, Part, load_spec, parse_part, with_part
from .prompts import Prompt, task_prompt

__all__ = [
    "BACKENDS",
    "ChatTokenizer",
    "Completion",
    "GenRequest",
    "GenerateResult",
    "JobHooks",
    "JobSpec",
    "Part",
    "Prompt",
    "dry_run",
    "load_backend",
    "load_spec",
    "parse_part",
    "run_job",
    "task_prompt",
    "with_part",
]
