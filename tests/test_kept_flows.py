"""Object flows kept from one checked file to the next (``objects.Home``, ``project.start_check``).

A module another file imports is computed once and kept for the files checked after it, unless
something outside its own run changed it: then the next file gets it computed afresh, so its
verdict never depends on the files checked before it.
"""
from __future__ import annotations

from pathlib import Path

from trainlint.config import Config, resolve_rules
from trainlint.engine import Settings, check_paths
from trainlint.static import project as project_modules
from trainlint.static.objects import Home, keep_finished

SETTINGS = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1,
                    respect_gitignore=False)

REGISTRY = '''from torch.utils.data import DataLoader  # the registry holds loaders


class Registry:
    pass


REG = Registry()
'''
STORES_A_LOADER = '''import torch
from torch.utils.data import DataLoader, DistributedSampler

from registry import REG

dataset = torch.utils.data.TensorDataset(torch.randn(64, 4))
REG.loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))
'''
TRAINS_ON_THE_REGISTRY = '''import torch
from torch.utils.data import DistributedSampler  # noqa: F401

from registry import REG

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = REG.loader
for epoch in range(3):
    for (x,) in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
'''


def _findings(paths):
    project_modules.forget_parsed()
    report = check_paths([str(p) for p in paths], SETTINGS)
    assert not report.errors
    return sorted((Path(f.path).name, f.line, f.rule) for f in report.findings)


def test_a_module_level_object_another_file_stored_into_is_computed_again(tmp_path):
    """The first file stores a sharded loader into the registry's module-level object. Kept as
    it is, the registry would hand that loader to the second file, which alone never sees one."""
    (tmp_path / "registry.py").write_text(REGISTRY)
    first = tmp_path / "a_setup.py"
    first.write_text(STORES_A_LOADER)
    second = tmp_path / "b_train.py"
    second.write_text(TRAINS_ON_THE_REGISTRY)
    assert _findings([second]) == []
    assert _findings([first, second]) == []


def _registry_flows_after(tmp_path, checked: str):
    """The registry module's flows as the next file's check starts, after checking ``checked``."""
    (tmp_path / "registry.py").write_text(REGISTRY)
    (tmp_path / "a_setup.py").write_text(STORES_A_LOADER)
    (tmp_path / "b_train.py").write_text(TRAINS_ON_THE_REGISTRY)
    project_modules.forget_parsed()
    check_paths([str(tmp_path / checked)], SETTINGS)
    registry = project_modules._PARSED[(tmp_path / "registry.py").resolve()][1]
    before = registry.kept_flows()
    assert before
    project_modules.start_check()
    return before, registry.kept_flows()


def test_an_imported_module_only_read_is_kept_for_the_next_file(tmp_path):
    before, after = _registry_flows_after(tmp_path, "b_train.py")
    assert after == before


def test_an_imported_module_another_file_changed_is_dropped_before_the_next_file(tmp_path):
    before, after = _registry_flows_after(tmp_path, "a_setup.py")
    # the flow of its module level, which the first file stored into, goes; its whole flow
    # (computed for its own roles, with objects of its own) was not changed and stays
    assert len(before) == 2 and after == [before[0]]


class _Flow:
    """What ``keep_finished`` reads of a flow: its home."""

    def __init__(self, home: Home) -> None:
        self.home = home


def _finished(home: Home) -> Home:
    home.start()
    home.stop()
    return home


def test_a_world_that_read_a_changed_world_is_not_kept():
    used, reader, alone = _finished(Home()), _finished(Home()), _finished(Home())
    reader.read(used)
    used.dirty = True
    flows = [_Flow(used), _Flow(reader), _Flow(alone)]
    assert keep_finished(flows) == {id(flows[2])}


def test_a_world_that_read_one_no_longer_kept_is_not_kept():
    evicted, reader = _finished(Home()), _finished(Home())
    reader.read(evicted)
    flows = [_Flow(reader)]  # the module of ``evicted`` is no longer parsed
    assert keep_finished(flows) == set()


def test_worlds_read_in_the_middle_of_a_run_finish_together():
    outer, inner = Home(), Home()
    outer.start()
    inner.start()
    inner.read(outer)  # an import cycle: the inner module reads the outer one, still running
    inner.stop()
    assert not inner.find().finished
    outer.stop()
    assert inner.find() is outer.find() and outer.find().finished
    flows = [_Flow(inner), _Flow(outer)]
    assert keep_finished(flows) == {id(flow) for flow in flows}


def test_reading_a_world_never_run_is_not_kept():
    reader, unrun = Home(), Home()
    reader.start()
    reader.read(unrun)
    reader.stop()
    assert keep_finished([_Flow(reader)]) == set()


def test_a_condition_decided_again_holds_its_new_value_never_both():
    """A path never assumes a condition both ways: a later decision (``if step == 0:`` on a later
    pass) replaces the earlier one, so what a later test reads does not depend on set order."""
    from trainlint.static.flow import _holding

    assumed = frozenset({("step == 0", True), ("use_amp", True)})
    later = _holding(assumed, {("step == 0", False)})
    assert later == frozenset({("step == 0", False), ("use_amp", True)})
    assert _holding(later, {("use_amp", True)}) == later
