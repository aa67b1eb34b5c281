"""How tests/data/ledger_v2 was written: by the code of main before tasks (commit fa5e7a1), from a checkout of it.

    PYTHONPATH=OLD/src python tests/data/make_ledger_v2.py OLD/tests tests/data/ledger_v2

Two cells (native, translate-act; qwen3-8b, tha_Thai) of ``make_cell(qwen, n_items=2, n_samples=2)``.
"""

import sys

from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

sys.path.insert(0, sys.argv[1])
from ledger_factory import make_cell  # the old checkout's factory, found through argv

qwen = load_tokenizer("qwen3-8b", "/work/shared/tokenizers")
led = Ledger(sys.argv[2])
led.append(make_cell(qwen, n_items=2, n_samples=2) + make_cell(qwen, n_items=2, n_samples=2, arm="translate-act"), qwen)
print(len(led), led.manifest()["version"])
