"""How tests/data/ledger_v3 was written: by the code of main before format 4 (commit 9ce5706), from a checkout.

    PYTHONPATH=OLD/src python tests/data/make_ledger_v3.py OLD/tests tests/data/ledger_v3 TOKENIZERS_DIR

An MGSM cell (native; qwen3-8b, tha_Thai) of ``make_cell(qwen, n_items=2, n_samples=2)`` and a Belebele cell
(translate-act) of two records with text golds: one shard in each of the two layouts format 3 writes.
"""

import sys

from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer


def belebele(qwen) -> list[dict]:
    """The fixture's Belebele records (also rebuilt by the tests, from today's factory)."""
    from ledger_factory import make_record  # the old checkout's (through argv) or, in the tests, today's

    return [
        make_record(qwen, "#### 3\n", arm="translate-act", item=i, task="belebele", gold=str(i + 2)) for i in range(2)
    ]


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    from ledger_factory import make_cell

    qwen = load_tokenizer("qwen3-8b", sys.argv[3])
    led = Ledger(sys.argv[2])
    led.append(make_cell(qwen, n_items=2, n_samples=2) + belebele(qwen), qwen)
    print(len(led), led.manifest()["version"])
