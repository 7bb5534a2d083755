"""TL901's message, one wording for the static rule (static/patterns/loops.py) and the guard
(runtime/check_save.py): the two must say the same thing about the same checkpoint."""
from __future__ import annotations

from typing import List, Optional


def not_resumable_message(label: str, optimizer_state: List[str], schedule_lost: bool,
                          schedule_restored: Optional[str], resumed_at: Optional[str] = None) -> str:
    """What a resumed run restarts, the consequence of each, and what to save beside the weights."""
    missing = " and ".join((["optimizer"] if optimizer_state else []) + (["scheduler"] if schedule_lost else []))
    lost = " and ".join(optimizer_state + (["the learning-rate schedule's position"] if schedule_lost else []))
    effects = (["a loss spike where the optimizer's state restarts"] if optimizer_state else []) + (
        ["the learning rate back at its schedule's start"] if schedule_lost else [])
    save = " and ".join((["optimizer.state_dict()"] if optimizer_state else []) + (
        ["scheduler.state_dict()"] if schedule_lost else []))
    kept = f" (the schedule's position comes back: {schedule_restored})" if schedule_restored else ""
    resumes = f"the program resumes with {resumed_at}, and " if resumed_at else ""
    return (
        f"{label} checkpoints the model weights inside the training loop but not the {missing} "
        f"state: {resumes}resuming from it restarts {lost} from scratch{kept}, so the resumed run is not the "
        f"one that was saved ({', and '.join(effects)}); also save {save} (and the GradScaler's "
        f"state and the step, if any), and load them when resuming."
    )
