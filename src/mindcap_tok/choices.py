"""The names and defaults that options offer (formats, frames, backends, budget grids, parser variants, ...).

Defined here, with no imports, so that the CLI's option definitions read them without importing the modules that
use them: ``mindcap-tok --help`` and every subcommand's ``--help`` load none of pandas, pyarrow, numpy,
tokenizers or pydantic. Each stage module imports its names from here (one definition).
"""

from __future__ import annotations

#: output formats of every command (``latex`` only where a table is the product)
FORMATS = ("table", "json", "csv", "md", "latex")
#: the paper's retrospective sweep grid (§3): what ``sweep``, ``report`` and the audits default to
SWEEP_BUDGETS = (64, 128, 192, 256, 384, 512, 768, 1024)
#: the scoring grid: the sweep grid plus the 2048/4096 extension (``score`` and ``score_ledger``'s default)
SCORE_BUDGETS = (*SWEEP_BUDGETS, 2048, 4096)
#: the largest budget accepted (a token count; 2**31 - 1, so every budget fits the ledger's int32 positions)
MAX_BUDGET = 2**31 - 1
#: the most split-halves one consistency check draws: each costs time and memory in every cell (a few ms and a few
#: hundred rows per cell), and the spread of an MAE settles within tens of splits
MAX_SPLITS = 1000
#: the two frames of a budget sweep: replay (prefixes of long generations) and independent (one decode per cap)
FRAMES = ("replay", "independent")
#: generation engines
BACKENDS = ("vllm", "transformers", "server")
#: FLORES-200 splits
SPLITS = ("dev", "devtest")
#: the languages ``premium`` measures by default, the splits it reads and its counting protocols
DEFAULT_LANGS = ("de", "th", "sw")
PREMIUM_SPLITS = (*SPLITS, "dev+devtest")
PROTOCOLS = ("per-sentence", "petrov2023")
#: pair frequency floor of a fixed-count extension rule when none is given, and the default rule's floor when
#: neither a size nor a frequency is given: a pair seen once is no evidence that the new token saves anything
DEFAULT_MIN_FREQ = 2
#: answer-parser variant name -> one-line description (the CLI and the audit list these)
VARIANTS = {
    "strict": "first line '#### <integer>' (ASCII digits, no separators); an unfinished last line counts",
    "first": "same as strict",
    "last": "the last answer line decides instead of the first",
    "terminated": "only answer lines ended by a newline (or ending a completed trace) count",
    "thousands": "tolerate thousands separators (5,600 / 5.600 / 1 234) in the integer",
    "native-digits": "tolerate Thai, Bengali, Devanagari, Telugu, Arabic-Indic and full-width digits",
}
#: how ``adapt`` initialises the embedding rows of an extension's new tokens (docs/adapt.md: which published method)
ADAPT_INITS = ("mean", "random", "hewitt", "focus")
