"""Write tests/data/ledger_v2 with today's (pre-task) code: two cells of make_cell records."""
import sys
from mindcap_tok.ledger.store import Ledger
from mindcap_tok.tokenization.load import load_tokenizer
sys.path.insert(0, "/tmp/base-h22ledger/tests")
from ledger_factory import make_cell

qwen = load_tokenizer("qwen3-8b", "/work/shared/tokenizers")
led = Ledger(sys.argv[1])
led.append(make_cell(qwen, n_items=2, n_samples=2) + make_cell(qwen, n_items=2, n_samples=2, arm="translate-act"), qwen)
print(len(led), led.manifest()["version"])
