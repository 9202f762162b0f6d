"""The encoder–decoder Transformer: its sizes and attention parts (``spec``), layers, the decoder's
key/value cache, and ``build_transformer``."""
