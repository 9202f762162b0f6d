"""Multi-head attention with pluggable parts: score functions (``scores/``), structural mask patterns
(``patterns/``), padding and causal masks, the probabilities hooks read (``probs``) and recording them."""
