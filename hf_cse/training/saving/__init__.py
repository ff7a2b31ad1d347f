"""The one save path of a training run (:class:`RunWriter`), verified checkpoints, recovery after a kill, and
preemption. See ``writer.py`` for the order of a save."""

from .checkpoints import (
    CHECKPOINT_PATTERN,
    check_named_checkpoint,
    checkpoints_newest_first,
    newest_verified_checkpoint,
    resolve_resume_checkpoint,
    resolve_resume_flag,
)
from .manifest import MANIFEST_FILE, verification_problem
from .preemption import PreemptionCallback
from .writer import RunWriter, is_disk_full, save_errors_as_one_line

__all__ = [
    "CHECKPOINT_PATTERN",
    "MANIFEST_FILE",
    "PreemptionCallback",
    "RunWriter",
    "check_named_checkpoint",
    "checkpoints_newest_first",
    "is_disk_full",
    "newest_verified_checkpoint",
    "resolve_resume_checkpoint",
    "resolve_resume_flag",
    "save_errors_as_one_line",
    "verification_problem",
]
