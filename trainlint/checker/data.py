"""Data order across epochs (TL301)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from ..events import FAMILY_DATA, Event, EventKind, as_written, reaches, same_object
from .base import Invariant, LineOf, Violation


# --------------------------------------------------------------------------- TL301
class _SamplerEntry(NamedTuple):
    """A loader pass begun: its sampler, and whether set_epoch ran since."""

    sampler: Optional[str]
    epoch_set: bool  # set_epoch since the last pass began


class _SamplerState(NamedTuple):
    """TL301's slice of a path: the loader passes begun."""

    entries: Tuple[_SamplerEntry, ...] = ()


class SamplerEpochs(Invariant):
    """TL301: a shuffling DistributedSampler starts another pass without set_epoch()."""

    rules = ("TL301",)
    follows_steps = False  # set_epoch and new passes over the loader

    def initial(self, history_known: bool):
        return _SamplerState()

    def feed(self, state: _SamplerState, ev: Event):
        if ev.kind is EventKind.SET_EPOCH:
            entries = tuple(
                e._replace(epoch_set=True) if same_object(e.sampler, ev.target) else e for e in state.entries
            )
            return _SamplerState(entries), []
        if ev.kind is EventKind.OPAQUE and FAMILY_DATA in ev.families:
            # A call we cannot read received the loader or sampler: it may call set_epoch.
            entries = tuple(e._replace(epoch_set=True) if reaches(ev, e.sampler) else e for e in state.entries)
            return _SamplerState(entries), []
        if ev.kind is EventKind.LOADER_ITER and ev.sampler is not None and (ev.shuffle or ev.shuffle_when):
            found = []
            entries = list(state.entries)
            index = next((i for i, e in enumerate(entries) if e.sampler == ev.sampler), None)
            if index is None:
                entries.append(_SamplerEntry(ev.sampler, False))
            else:
                if not entries[index].epoch_set:
                    found.append(Violation("TL301", ev))
                entries[index] = _SamplerEntry(ev.sampler, False)
            return _SamplerState(tuple(entries)), found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        sampler = as_written(v.at.sampler, v.at.target) or "the DistributedSampler"
        shuffles = "shuffles" if v.at.shuffle else f"shuffles when {v.at.shuffle_when} is true"
        return (
            f"{v.at.label} starts another epoch over a loader whose DistributedSampler {sampler} "
            f"{shuffles}, but {sampler}.set_epoch(epoch) is never called in the epoch loop: every "
            f"epoch sees the same order on every rank; call {sampler}.set_epoch(epoch) at the top "
            f"of the epoch loop."
        )


