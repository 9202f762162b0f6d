"""Training and evaluating one model: the LightningModule (``task``), its settings (``optim``,
``decode``), building from the config (``build``), callbacks, loggers, checkpoints, distributed runs and
one run end to end (``run``)."""
