"""One thread's event stream within a guard session: its checker state and the few counters the
hooks need to fill in event fields. A training loop runs in one thread, so each thread is checked
on its own; two loops in two threads do not interleave into one bogus order."""
from __future__ import annotations

from typing import Callable, List, Optional, Set


class Stream:
    __slots__ = (
        "state", "steps", "steps_unseen", "fetches", "backwards", "fetches_at_backward", "multi_batch",
        "scaled", "busy", "scaler_step", "scaler_stepped", "pending_sync", "fp16_autocast",
        "accumulating", "last_step_site", "backward_total", "zeroed_after", "stepping", "window_sites",
        "fetches_at_window",
        "cycle", "cycle_fetches", "loader", "pending_pass", "watch", "wrapped_passes",
    )

    def __init__(self, state: tuple) -> None:
        self.state = state  # the shared checker's state
        self.steps = 0  # optimizer steps so far (TL810 messages name the step)
        self.steps_unseen = False  # compiled code stepped too, uncounted (the hub's ``unseen``)
        self.fetches = 0  # DataLoader batches fetched so far
        # The accumulation window: backward passes since the last step or zero_grad.
        self.backwards = 0
        self.fetches_at_backward = 0
        self.multi_batch = False  # a batch was fetched between two of them
        self.scaled = False  # one of them went through GradScaler.scale
        self.busy: Set[str] = set()  # hooks running on this thread, so nested calls are not events
        self.scaler_step: Optional[object] = None  # the optimizer GradScaler.step is stepping
        self.scaler_stepped = False  # ...and whether its own step() ran (it is skipped on inf/NaN)
        # FSDP decides at backward time whether to reduce gradients: how to ask, set by its forward.
        self.pending_sync: Optional[Callable[[], bool]] = None
        # Where a float16 autocast region was entered with gradients on, since the last backward.
        self.fp16_autocast: Optional[tuple] = None
        self.accumulating = False  # some optimizer step accumulated several batches
        self.last_step_site: Optional[tuple] = None
        self.backward_total = 0  # backward passes so far (never reset)
        # The backward() lines of the current window, and the batches fetched when it opened: a
        # line run again with no DataLoader batch in between is a micro-step of a get_batch() loop.
        self.window_sites: set = set()
        self.fetches_at_window = 0
        self.zeroed_after = -1  # backward_total when the latest zero_grad ran
        self.stepping: Optional[object] = None  # the optimizer whose step is being checked
        # For sampling (see .sampling): the events since the anchor optimizer's last step, the
        # batches fetched before them, and the data loader iterator of the latest batch (weakly).
        self.cycle: List[object] = []
        self.cycle_fetches = 0
        self.loader: Optional[Callable[[], object]] = None
        # A DistributedSampler's pass begun and not yet known to train: (site, sampler, shuffle).
        self.pending_pass: Optional[tuple] = None
        # The no_grad block of this thread watched for parameters updated by hand (hooks_hand);
        # an optimizer step inside it stops the watch.
        self.watch: Optional[object] = None
        # ids of the loaders that wrap a DataLoader and read ahead whose pass is under way (their
        # pass, not the DataLoader's, ends the pass over the data: see hooks_data)
        self.wrapped_passes: Set[int] = set()

    def backward(self, scaled: bool, site=None, shared_graph: bool = False) -> None:
        """One backward pass. ``shared_graph``: retain_graph=True, several losses of one forward."""
        if self.backwards and self.fetches != self.fetches_at_backward:
            self.multi_batch = True
        elif self.fetches == self.fetches_at_window and site is not None and not shared_graph:
            # No DataLoader in this window (tensors sliced by a get_batch()): the same backward()
            # line again before the step is another micro-batch; a GAN's or a multi-loss step's
            # backward passes are different lines.
            if site in self.window_sites:
                self.multi_batch = True
            elif len(self.window_sites) < 8:
                self.window_sites.add(site)
        self.backwards += 1
        self.backward_total += 1
        self.fetches_at_backward = self.fetches
        self.scaled = self.scaled or scaled

    def end_window(self) -> bool:
        """At a step or zero_grad: was this an accumulation boundary, i.e. did the backward passes
        since the last one see more than one batch? Two losses backpropagated for one batch (a GAN's
        real and fake terms) are not accumulation."""
        boundary = self.multi_batch
        self.backwards = 0
        self.multi_batch = False
        self.window_sites.clear()
        self.fetches_at_window = self.fetches
        self.scaled = False
        return boundary
