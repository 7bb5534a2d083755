"""The runtime guard: the shared checker and the rule catalog, fed by hooks in a live run.

``guard`` and the exceptions import without torch; torch is imported when a guard starts.
"""
from .errors import TrainingInvariantError, TrainingInvariantWarning
from .guard import Guard, guard

__all__ = ["Guard", "TrainingInvariantError", "TrainingInvariantWarning", "guard"]
