"""The one save path of a training run (:class:`RunWriter`), verified checkpoints, recovery after a kill, and
preemption. See ``writer.py`` for the order of a save: the Trainer writes ``checkpoint-N``, the writer's ``on_save``
commits it with its manifest."""

from .checkpoints import (
    CHECKPOINT_PATTERN,
    check_named_checkpoint,
    checkpoints_newest_first,
    newest_verified_checkpoint,
    resolve_resume_checkpoint,
    resolve_resume_flag,
    run_entries,
    start_anew_hint,
)
from .manifest import MANIFEST_FILE, is_committed, verification_problem
from .preemption import PreemptionCallback
from .writer import RunWriter, TrainerSaveError, is_disk_full, save_errors_as_one_line

__all__ = [
    "CHECKPOINT_PATTERN",
    "MANIFEST_FILE",
    "PreemptionCallback",
    "RunWriter",
    "TrainerSaveError",
    "check_named_checkpoint",
    "checkpoints_newest_first",
    "is_committed",
    "is_disk_full",
    "newest_verified_checkpoint",
    "resolve_resume_checkpoint",
    "resolve_resume_flag",
    "run_entries",
    "save_errors_as_one_line",
    "start_anew_hint",
    "verification_problem",
]
