"""Tokenizers of every family behind one interface (:class:`~.base.TokenizerBackend`).

``load`` resolves a model name to a :class:`~.load.ResolvedTokenizer`; ``hf``, ``tiktoken_family`` and
``sentencepiece_family`` are the three back ends; ``pipeline`` is the one parsed description of a
``tokenizer.json``; ``bytelevel`` and ``byte_tables`` the byte tables; ``registry`` the known model names.
Nothing outside this subpackage branches on a family's name.
"""
