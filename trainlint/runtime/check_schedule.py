"""TL601 scheduler-cadence-mismatch, from a scheduler's horizon and the optimizer steps around it:

- an epoch-horizon schedule stepped after every optimizer step runs past its horizon while
  training goes on (CosineAnnealingLR climbs back up, OneCycleLR raises) — reported at the step
  that overruns it;
- a step-horizon schedule (its horizon is about the run's optimizer steps) stepped once per
  epoch covers a fraction of its horizon by the end of the run — reported when the run ends.

Reported at the scheduler.step() line, as the static analyzer does."""
from __future__ import annotations

import weakref
from typing import Optional

RULES = ("TL601",)


def horizon(scheduler) -> Optional[int]:
    """How many scheduler steps the schedule spans, for the classes whose horizon is one number."""
    from torch.optim import lr_scheduler as s

    if isinstance(scheduler, s.OneCycleLR):
        return scheduler.total_steps
    if isinstance(scheduler, s.CosineAnnealingLR):
        return scheduler.T_max
    if isinstance(scheduler, (s.LinearLR, s.PolynomialLR)):
        return scheduler.total_iters
    return None


class _Track:
    __slots__ = ("scheduler", "name", "horizon", "steps", "count_before", "first_opt_step", "site", "overrun")

    def __init__(self, scheduler, span: int, opt_steps: int, site) -> None:
        self.scheduler = weakref.ref(scheduler)
        self.name = type(scheduler).__name__  # the run may have dropped the scheduler by its end
        self.horizon = span
        self.steps = 0  # scheduler steps taken by the user
        # The scheduler's own count of its steps before its first seen one: steps are read from it,
        # so those taken while the guard coasted through a steady loop (see .sampling) count too.
        self.count_before = _step_count(scheduler)
        self.first_opt_step = opt_steps  # optimizer steps already taken at its first step
        self.site = site
        self.overrun = False

    def update(self, stepping: bool) -> None:
        """Bring ``steps`` up to date: during a step (not counted by the scheduler yet), or after."""
        count = _step_count(self.scheduler())
        if count is not None and self.count_before is not None:
            self.steps = count - self.count_before + stepping
        elif stepping:
            self.steps += 1


def _step_count(scheduler) -> Optional[int]:
    """LRScheduler counts its steps in ``_step_count`` (the one its constructor takes included)."""
    count = getattr(scheduler, "_step_count", None)
    return count if isinstance(count, int) else None


def install(patcher, hub) -> None:
    from torch.optim import lr_scheduler as s

    tracks: dict = {}  # id(scheduler) -> _Track, for the schedulers whose horizon is one number

    def on_new_scheduler_step(stream, scheduler, site) -> None:
        track = tracks.get(id(scheduler))
        if track is not None and track.scheduler() is scheduler:
            return  # a known scheduler stepped at another line
        span = horizon(scheduler) or 0
        if span <= 1:
            return  # nothing to check: LambdaLR, StepLR, ...
        if len(tracks) >= 64:
            tracks.clear()
        # Optimizer steps before the first scheduler step belong to it (a step, then its step).
        tracks[id(scheduler)] = _Track(scheduler, span, stream.steps - 1, site)
        hub.wake(on_scheduler_step)

    def on_scheduler_step(stream, scheduler, site) -> None:
        track = tracks.get(id(scheduler))
        if track is not None and track.scheduler() is not scheduler:  # a new one where a freed one was
            del tracks[id(scheduler)]
            on_new_scheduler_step(stream, scheduler, site)
            track = tracks.get(id(scheduler))
        if track is None:
            return
        track.update(stepping=True)
        track.site = site
        optimizer_steps = stream.steps - track.first_opt_step
        # Past the horizon, stepped about once per optimizer step: an epoch horizon run per batch.
        # A warmup (LinearLR) that ends and stays flat is fine; a cosine or one-cycle is not.
        cycles = isinstance(scheduler, (s.CosineAnnealingLR, s.OneCycleLR))
        if cycles and not track.overrun and track.steps > track.horizon and optimizer_steps <= 1.5 * track.steps:
            track.overrun = True
            name, span = type(scheduler).__name__, track.horizon
            hub.found("TL601", site, lambda: (
                f"scheduler.step() runs after every optimizer step, but this {name}'s horizon is "
                f"{span} steps, which the run has passed ({track.steps} steps) while training goes "
                f"on: the horizon counts epochs, so the schedule is over within the first epochs "
                f"(a cosine climbs back up, OneCycleLR raises); give it a horizon in optimizer steps "
                f"(epochs * len(loader)) or step it once per epoch."
            ))

    def on_end(stream) -> None:
        for track in list(tracks.values()):
            track.update(stepping=False)
            optimizer_steps = stream.steps - track.first_opt_step
            # Several optimizer steps per scheduler step, a horizon about the run's optimizer
            # steps, and less than half of it covered: a per-step schedule stepped per epoch.
            if (track.horizon and track.steps >= 2 and optimizer_steps >= 2 * track.steps
                    and 2 * track.steps <= track.horizon and 2 * optimizer_steps >= track.horizon):
                name, span, done = track.name, track.horizon, track.steps
                hub.found("TL601", track.site, lambda: (
                    f"scheduler.step() ran {done} times for {optimizer_steps} optimizer steps, but "
                    f"this {name}'s horizon is {span} steps: it counts optimizer steps and is stepped "
                    f"once per epoch, so the run ends {100 * done // span}% into its schedule (no "
                    f"warmup finished, no decay); step it after every optimizer step."
                ))
        tracks.clear()

    def on_unseen(stream) -> None:
        tracks.clear()  # optimizer steps went uncounted: the cadence can no longer be told

    hub.observe("new_scheduler_step", RULES, on_new_scheduler_step)
    hub.observe("unseen", RULES, on_unseen)
    # Awake once a scheduler with a horizon is tracked: steps of LambdaLR & co. pay nothing.
    hub.observe("scheduler_step", RULES, on_scheduler_step, awake=False)
    hub.observe("end", RULES, on_end)
