"""Validate at the last training step, whatever the validation cadence.

Lightning validates every ``trainer.val_check_interval`` steps (or epochs), so a run whose
``trainer.max_steps`` is not a multiple of the cadence ends with its last steps unvalidated: the best
checkpoint, ``val/*`` in the history and the model that is tested all miss them, and a run shorter than
one interval has no validation and no best checkpoint at all. At the step that reaches ``max_steps``
this callback asks the loop to stop (``trainer.should_stop``), which Lightning answers with one
validation at that step, as it does for early stopping; a step that was due for validation anyway is
validated once. ``trainer.max_time`` already stops through ``should_stop``, and so validates last too.
"""

from __future__ import annotations

import lightning as L


class FinalValidation(L.Callback):
    """Makes the last training step (``trainer.max_steps``) a validation step."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
