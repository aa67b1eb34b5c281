"""Tokenizers of every family behind one interface (:class:`~.base.TokenizerBackend`).

``load`` resolves a model name to a :class:`~.load.ResolvedTokenizer`; ``hf``, ``tiktoken_family`` and
``sentencepiece_family`` are the three back ends; ``tiktoken_engine`` runs a byte-level BPE ``tokenizer.json``
with tiktoken; ``pipeline`` is the one parsed description of a ``tokenizer.json``; ``pretoken_cache`` the
memoised encoder; ``long_text`` encodes texts too long for a library's regex engine (every encode path
goes through it); ``bytelevel`` and ``byte_tables`` the byte tables; ``ids`` id lists as decoders take them;
``registry`` the known model names (read once per process). Nothing outside this subpackage branches on a family:
what differs by family in extending a vocabulary is picked by the back end (``base.ExtensionFamilies``).
"""
