"""What a model's attention does, as pure functions: entropy, peak weight and alignment error rate of
attention maps (``diagnostics``), head importance and pruning (``head_importance``), and images of
attention maps and per-head tables (``images``). Callbacks in ``attnlab.training.callbacks`` run them
during training."""
