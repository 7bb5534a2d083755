"""Sampling a steady training loop: what the guard costs per step once the loop repeats itself.

A training loop repeats one cycle of calls between two steps of its optimizer: zero_grad, a
batch, forward, backward, clip, step, scheduler step. The guard checks every step until the loop
has run ``LEARNING_STEPS`` steps and repeated the same cycle (the same events, call site by call
site, and as many batches) ``STABLE_CYCLES`` times in a row with no finding and no check waiting
for something. Then it *coasts*: the per-step hooks are taken out, so those steps run torch's own
functions, and only the global optimizer step hook stays in, to count steps. About every ``GAP``
steps (at random, so that no periodic branch of the loop can always fall between two samples) one
whole cycle is checked again, from a clean checker state; a cycle that is not the steady one puts
the guard back to checking every step until the loop is steady again.

The hooks that stay in also end coasting at once: an eval(), a checkpoint, a sampler's new epoch,
a second thread's step, a GradScaler skipping step after step. So does the approach of the end of the data loader's pass,
forecast from its length, so that the end of every epoch is checked. A loader without a length
is never coasted through.

The trade-off: a bug on a step the guard coasts through, with nothing rare around it (clipping
skipped on one step in thousands), is found only if a sample lands on it. ``check_every_step=True``
checks every step, at the full cost.
"""
from __future__ import annotations

import random
import weakref
from typing import Optional

LEARNING_STEPS = 100  # optimizer steps checked in full before the first coast
STABLE_CYCLES = 8  # identical clean cycles in a row before coasting
GAP = 50  # mean optimizer steps between two sampled cycles
CYCLE_KEPT = 512  # events recorded for one cycle at most (a loop that never steps is not a cycle)


class StepSampler:
    """The guard's sampling of one session (the hub owns one; everything here runs under its
    hooks, on the training thread)."""

    def __init__(self, hub) -> None:
        self.hub = hub
        self.enabled = True  # no active guard asked to check every step
        self._random = random.Random(0)  # its own generator: the user's random streams are untouched
        self.reset()

    def reset(self) -> None:
        self._random.seed(0)  # each session samples the same steps of the same program
        self.anchor: Optional[int] = None  # id of the optimizer whose steps delimit cycles
        self._anchor_ref = None
        self.anchor_steps = 0
        self.threads = 1  # training threads seen stepping (more than one: never coast)
        self._stepper = None  # the stream of the thread that steps
        self.stream = None  # the stream being coasted
        self._last: Optional[tuple] = None  # the previous cycle
        self._steady: Optional[tuple] = None  # the cycle coasting assumes
        self._stable = 0
        self._sample = False  # the cycle under way is a sample
        self._countdown = 0  # anchor steps left before the next check
        self._then_learn = False  # ...which checks every step again (a loader's pass ends soon)
        self._other_steps = 0  # steps of other optimizers since the anchor's last one
        self._skipped = 0  # scaler.update() calls in a row with no optimizer step before them
        self._steps_at_update = -1

    # ------------------------------------------------------------------ while checking
    def after_step(self, stream, optimizer) -> None:
        """At each checked optimizer step: the end of a cycle when it is the anchor's."""
        if stream is not self._stepper:
            if self._stepper is not None:
                self.threads = 2  # two threads' loops are not one cycle: check every step
            self._stepper = stream
        if id(optimizer) != self.anchor:
            if self.anchor is None or self._anchor_ref() is None:  # the first optimizer, or a new one
                self.anchor, self._anchor_ref = id(optimizer), weakref.ref(optimizer)
                self._start_cycle(stream)
            return
        hub = self.hub
        cycle = (tuple(stream.cycle), stream.fetches - stream.cycle_fetches)
        clean = not hub.novel
        self._start_cycle(stream)
        self.anchor_steps += 1
        if self._sample:
            self._sample = False
            if clean and cycle == self._steady:
                self._coast(stream, cycle)
                return
            self._last, self._stable = None, 0  # the loop changed: check every step
        self._stable = self._stable + 1 if clean and cycle == self._last else 0
        self._last = cycle
        if (self._stable >= STABLE_CYCLES and self.anchor_steps >= LEARNING_STEPS and self.enabled
                and self.threads == 1):
            self._steady = cycle
            self._coast(stream, cycle)

    def _start_cycle(self, stream) -> None:
        stream.cycle.clear()
        stream.cycle_fetches = stream.fetches
        self.hub.novel = False

    def _coast(self, stream, cycle: tuple) -> None:
        if self.hub.watches:
            return  # another thread's no_grad block is watched: its exit hook must stay in (hooks_hand)
        steps = _steps_before_loader_end(stream, cycle[1])
        if steps is not None and steps < 2:
            return  # the pass ends within a cycle or two, or cannot be forecast: keep checking
        gap = self._random.randint(GAP // 2, GAP + GAP // 2)
        self._then_learn = steps is not None and steps <= gap
        self._countdown = steps if self._then_learn else gap
        self._other_steps = self._skipped = 0
        self._steps_at_update = -1
        self.stream = stream
        hub = self.hub
        hub.first_state = hub.resumed(hub.first_state)  # another thread may now step unseen
        hub.patcher.set_per_step(False)
        hub.coasting = True

    # ------------------------------------------------------------------ while coasting
    def coast_step(self, stream, optimizer) -> None:
        """An optimizer step while coasting (the global step pre-hook)."""
        stream.steps += 1
        if stream is not self.stream:  # another thread steps too: check every step from now on
            self.threads = 2
            self.resume()
        elif id(optimizer) == self.anchor:
            self._other_steps = 0
            self._countdown -= 1
            if self._countdown <= 0:
                self.resume(sample=not self._then_learn)
        else:
            self._other_steps += 1
            if self._other_steps > 16:  # the anchor no longer steps: another optimizer took over
                self.resume()

    def coast_scaler_update(self, stream) -> None:
        """scaler.update() while coasting. A GradScaler that skips every step (inf/NaN gradients
        from a loss gone NaN) steps no optimizer, so no sample would come: after ``GAP`` skipped
        steps in a row, check every step again."""
        if stream.steps == self._steps_at_update:
            self._skipped += 1
            if self._skipped >= GAP:
                self.resume()
        else:
            self._skipped = 0
        self._steps_at_update = stream.steps

    def resume(self, sample: bool = False) -> None:
        """Put the per-step hooks back and check from a clean state: one sampled cycle (at an
        anchor step), or every step until the loop is steady again."""
        hub = self.hub
        if not hub.coasting:
            return
        hub.coasting = False
        hub.patcher.set_per_step(True)
        stream = self.stream
        self.stream = None
        # What happened in the steps no one watched is unknown: each invariant starts afresh
        # (with unknown history), except those whose events the guard saw all along.
        stream.state = hub.resumed(stream.state)
        self._start_cycle(stream)
        self._sample = sample
        self._last, self._stable = None, 0
        hub.notify("resume", stream)


def _steps_before_loader_end(stream, batches_per_cycle: int) -> Optional[int]:
    """Anchor steps to coast so that checking every step resumes a cycle before the loader's pass
    ends; None when the cycle fetches no batch; 0 when the end cannot be forecast."""
    if not batches_per_cycle:
        return None
    iterator = stream.loader() if stream.loader is not None else None
    try:
        left = len(iterator) - iterator._num_yielded
    except (TypeError, AttributeError):  # no iterator left, or an IterableDataset with no length
        return 0
    return max(0, left // batches_per_cycle - 1)
