"""Multi-file programs: the checked file's imports of its own project are read and followed.

Each directory under fixtures/projects is checked as a user would (``trainlint <dir>``); the
findings, in whichever file they are, must be exactly the ``# expect:`` comments of all its files.
"""
from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest
from fixture_expectations import PROJECTS, expected_findings

from trainlint.catalog import load_catalog
from trainlint.config import find_config
from trainlint.engine import Settings, check_paths
from trainlint.static import project as project_modules

ALL_RULES = frozenset(r.id for r in load_catalog().values() if not r.opt_in)
PROJECT_DIRS = sorted(p for p in PROJECTS.iterdir() if p.is_dir())


def _expected(project: Path):
    found = set()
    for path in project.rglob("*.py"):
        for line, rule in expected_findings(path.read_text(encoding="utf-8")):
            found.add((path.relative_to(project).as_posix(), line, rule))
    return found


def _actual(project: Path, paths, cache=False):
    # a project's pyproject.toml may describe its own training APIs ([tool.trainlint.library])
    report = check_paths([str(p) for p in paths], Settings(rules=ALL_RULES, config=find_config(project), cache=cache))
    assert not report.errors
    return {(Path(f.path).resolve().relative_to(project.resolve()).as_posix(), f.line, f.rule) for f in report.findings}


@pytest.mark.parametrize("project", PROJECT_DIRS, ids=lambda p: p.name)
def test_project_findings_match_expectations(project):
    assert _actual(project, [project]) == _expected(project)


@pytest.mark.parametrize("project", [p for p in PROJECT_DIRS if _expected(p)], ids=lambda p: p.name)
def test_a_rule_selected_alone_finds_what_it_finds_among_all(project):
    """``--select TL802``: the rule's findings do not depend on which other rules run (a rule whose
    trigger text is in an imported module, the project's focal loss, is read for as well)."""
    for rule in sorted({rule for _, _, rule in _expected(project)}):
        report = check_paths([str(project)], Settings(rules=frozenset({rule}), config=find_config(project), cache=False))
        found = {(Path(f.path).resolve().relative_to(project.resolve()).as_posix(), f.line, f.rule) for f in report.findings}
        assert found == {e for e in _expected(project) if e[2] == rule}, rule


@pytest.mark.parametrize("project", PROJECT_DIRS, ids=lambda p: p.name)
def test_a_check_keeps_the_modules_it_reads_while_it_runs(project, monkeypatch):
    """With room for a single kept model, every module a check reads is evicted at once and,
    collection off, freed as soon as nothing holds it: the findings are the same."""
    monkeypatch.setattr(project_modules, "MAX_PARSED", 1)
    project_modules.forget_parsed()
    gc.disable()
    try:
        assert _actual(project, [project]) == _expected(project)
    finally:
        gc.enable()
        project_modules.forget_parsed()


@pytest.mark.parametrize("project", PROJECT_DIRS, ids=lambda p: p.name)
def test_a_files_verdict_does_not_depend_on_the_files_checked_before_it(project):
    """The project's files checked in one process, in one order and in the reverse order, find
    what checking each file alone (from a fresh process state) finds. (Modules read for one file
    are kept for the next; what they computed for the first must not answer the second.)"""
    files = sorted(project.rglob("*.py"))

    def checked(paths):
        project_modules.forget_parsed()
        return _actual(project, paths)

    alone = set().union(*(checked([path]) for path in files))
    assert checked(files) == alone
    assert checked(list(reversed(files))) == alone


def test_a_module_read_during_a_check_lives_until_the_check_ends(tmp_path):
    """A model's functions link to it weakly: a check pins what it reads, even once evicted."""
    (tmp_path / "helpers.py").write_text("def helper(optimizer):\n    optimizer.step()\n", encoding="utf-8")
    project_modules.forget_parsed()
    gc.disable()
    try:
        with project_modules.pinning():
            helper = project_modules._load(tmp_path / "helpers.py").functions["helper"]
            project_modules.forget_parsed()  # evicted, as by other modules read after it
            assert helper.owner is not None and "helper" in helper.owner.functions
        assert helper.owner is None  # freed once the check is over
    finally:
        gc.enable()


def test_checking_only_the_entry_script_reports_the_statement_in_the_module_it_imports():
    project = PROJECTS / "engine_split_bad"
    assert _actual(project, [project / "main.py"]) == _expected(project)


def test_messages_name_the_other_files_line():
    project = PROJECTS / "engine_split_bad"
    report = check_paths([str(project / "main.py")], Settings(rules=frozenset({"TL102"}), cache=False))
    assert [f.rule for f in report.findings] == ["TL102"]
    assert "(engine.py line 14)" in report.findings[0].message


def test_a_cached_result_is_not_reused_once_an_imported_module_changes(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    for name in ("main.py", "engine.py"):
        (project / name).write_text((PROJECTS / "engine_split_good" / name).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    assert _actual(project, [project / "main.py"], cache=True) == set()
    # engine.py now steps the optimizer before the clip: only engine.py changed, main.py did not
    engine = project / "engine.py"
    text = engine.read_text(encoding="utf-8")
    moved = text.replace(
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n        loss_scaler.step(optimizer)\n",
        "        loss_scaler.step(optimizer)\n        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n",
    )
    assert moved != text
    engine.write_text(moved, encoding="utf-8")
    assert ("engine.py", 14, "TL101") in _actual(project, [project / "main.py"], cache=True)


def test_only_files_under_the_projects_roots_are_read(tmp_path):
    import libcst as cst

    from trainlint.static.module import ModuleModel
    from trainlint.static.project import Project

    (tmp_path / "engine.py").write_text("def train_one_epoch(loader):\n    pass\n", encoding="utf-8")
    script = tmp_path / "train.py"
    source = "from json import loads\nfrom engine import train_one_epoch\nimport missing_module\n"
    script.write_text(source, encoding="utf-8")
    project = Project(script)
    model = ModuleModel(cst.parse_module(source), source, path=script)
    assert project.function(model, "loads") is None  # the standard library is not the project
    assert project.function(model, "missing_module.run") is None
    found = project.function(model, "train_one_epoch")
    assert found is not None and found.owner.path == (tmp_path / "engine.py").resolve()
    assert list(project.read) == [(tmp_path / "engine.py").resolve()]


def test_a_script_reads_the_packages_of_the_src_layout_but_not_a_library_shipped_there(tmp_path):
    import libcst as cst

    from trainlint.static.module import ModuleModel
    from trainlint.static.project import Project

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'kit'\n", encoding="utf-8")
    for package in ("kit", "accelerate"):
        (tmp_path / "src" / package).mkdir(parents=True)
        (tmp_path / "src" / package / "__init__.py").write_text("def build(x):\n    return x\n", encoding="utf-8")
    script = tmp_path / "scripts" / "train.py"
    script.parent.mkdir()
    source = "from kit import build\nfrom accelerate import build as prepare\n"
    script.write_text(source, encoding="utf-8")
    project = Project(script)
    model = ModuleModel(cst.parse_module(source), source, path=script)
    found = project.function(model, "build")
    assert found is not None and found.owner.path == (tmp_path / "src" / "kit" / "__init__.py").resolve()
    assert project.function(model, "prepare") is None  # a described library, even shipped in src/


def test_a_cached_result_is_not_reused_once_the_module_that_built_its_loaders_changes(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    source = PROJECTS / "loaders_from_builder_bad"
    for path in source.rglob("*.py"):
        target = project / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    main = project / "gnnkit" / "main.py"
    assert _actual(project, [main], cache=True) == {("gnnkit/fit/loop.py", 17, "TL301")}
    # The builder stops shuffling: only splits.py changed, neither main.py nor loop.py did.
    splits = project / "gnnkit" / "data" / "splits.py"
    text = splits.read_text(encoding="utf-8")
    unshuffled = text.replace("DistributedSampler(train_set)", "DistributedSampler(train_set, shuffle=False)")
    assert unshuffled != text
    splits.write_text(unshuffled, encoding="utf-8")
    assert _actual(project, [main], cache=True) == set()


def test_the_project_gate_reads_calls_of_imported_names_aliases_modules_and_star_imports(tmp_path):
    from trainlint.static.project import Project

    (tmp_path / "engine.py").write_text(
        "def train_one_epoch(model, loader, optimizer):\n    for x in loader:\n"
        "        model(x).mean().backward()\n        optimizer.step()\n\n\ndef describe(model):\n    return str(model)\n\n\n"
        "class LoopBase:\n    def fit(self, model, loader, optimizer):\n        train_one_epoch(model, loader, optimizer)\n",
        encoding="utf-8")
    script = tmp_path / "main.py"
    project = Project(script)
    trains = {
        "from engine import train_one_epoch\ntrain_one_epoch(m, l, o)\n": True,
        "from engine import train_one_epoch as fit\nfit(m, l, o)\n": True,
        "import engine\nengine.train_one_epoch(m, l, o)\n": True,
        "import engine as e\ne.describe(m)\n": False,  # only a function that cannot train is called
        "from engine import describe\ndescribe(m)\n": False,
        "from engine import train_one_epoch\n": False,  # imported, never called
        "from engine import *\n": True,  # any of its names may be called
        "from engine import train_one_epoch\ntrain_one_epoch (m, l, o)\n": True,
        # a method of another object spelled like the imported name is not that name
        "from engine import train_one_epoch\nrunner.train_one_epoch(m, l, o)\n": False,
        "import engine as e\ne.describe(m)\ne.train_one_epoch (m, l, o)\n": True,
        "import engine\nother.engine.train_one_epoch(m, l, o)\n": False,
        # a class derived from a project class runs its methods on the file's objects
        "from engine import LoopBase\nclass Mine(\n    LoopBase,\n):\n    pass\nMine().fit(m, l, o)\n": True,
        "from engine import LoopBase\nclass Mine(lib.LoopBase):\n    pass\n": False,
    }
    for source, expected in trains.items():
        script.write_text(source, encoding="utf-8")
        assert project.imports_training_text(source) is expected, source


def test_a_finding_in_an_imported_module_reads_the_same_from_each_checked_file(tmp_path):
    """engine.py's clip after step, reached from train.py and checked in engine.py itself, is one
    finding: its message names lines as seen from engine.py both times."""
    (tmp_path / "engine.py").write_text(
        "def train_one_epoch(model, loader, optimizer):\n"
        "    for x in loader:\n"
        "        optimizer.zero_grad()\n"
        "        model(x).backward()\n"
        "        optimizer.step()\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom engine import train_one_epoch\n"
        "for epoch in range(3):\n    train_one_epoch(model, loader, optimizer)\n", encoding="utf-8")
    report = check_paths([str(tmp_path)], Settings(rules=frozenset({"TL101"}), cache=False))
    assert [(Path(f.path).name, f.line) for f in report.findings] == [("engine.py", 6)]
    assert "after optimizer.step() (line 5)" in report.findings[0].message


# ``self.loss_func(log_probs, labels) (models/Update.py line 45)``: a statement of another file,
# named by its path relative to the checked directory and its line.
_NAMED_IN_FILE = re.compile(r"([A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\([^()]*(?:\([^()]*\)[^()]*)*\))?) \(([\w./-]+\.py) line (\d+)\)")


@pytest.mark.parametrize("project", [p for p in PROJECT_DIRS if p.name.endswith("_bad")], ids=lambda p: p.name)
def test_a_statement_of_another_file_is_named_with_its_file_and_line(project):
    """Every ``label (file.py line N)`` in a finding's message is on that line of that file (a
    message names both statements with lines, the other file's too)."""
    report = check_paths([str(project)], Settings(rules=ALL_RULES, config=find_config(project), cache=False))
    for finding in report.findings:
        for label, named, number in _NAMED_IN_FILE.findall(finding.message):
            candidates = [p for p in project.rglob("*.py") if p.as_posix().endswith("/" + named)]
            assert len(candidates) == 1, f"{finding.rule}: {named} is not one file of the project: {finding.message}"
            lines = candidates[0].read_text(encoding="utf-8").splitlines()
            head = label.split("(")[0].split("[")[0].rsplit(".", 1)[-1]
            assert head in lines[int(number) - 1], (
                f"{finding.rule}: `{label}` is not on {named} line {number}: {finding.message}")


def test_a_pattern_finding_names_the_other_files_statement_by_line(tmp_path):
    """TL801 through a training function of another module, TL502 through an evaluation helper of
    another module: the loss and the forward there are named by file and line, not by file alone."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "models" / "nets.py").write_text(
        "from torch import nn\n\n\nclass Mlp(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 2)\n        self.out = nn.Softmax(dim=1)\n\n"
        "    def forward(self, x):\n        return self.out(self.fc(x))\n", encoding="utf-8")
    (tmp_path / "models" / "client.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Client:\n    def __init__(self, data):\n"
        "        self.data = data\n        self.criterion = nn.CrossEntropyLoss()\n\n"
        "    def fit(self, net):\n        opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "        for x, y in self.data:\n            opt.zero_grad()\n"
        "            loss = self.criterion(net(x), y)\n            loss.backward()\n            opt.step()\n\n\n"
        "def score(net, data):\n    total = 0.0\n    for x, y in data:\n        total += net(x).sum().item()\n"
        "    return total\n", encoding="utf-8")
    (tmp_path / "main.py").write_text(
        "import copy\n\nfrom models.client import Client, score\nfrom models.nets import Mlp\n\n\n"
        "def main(data, rounds):\n    net = Mlp()\n    for _ in range(rounds):\n"
        "        Client(data).fit(net=copy.deepcopy(net))\n    net.eval()\n    print(score(net, data))\n",
        encoding="utf-8")
    report = check_paths([str(tmp_path / "main.py")], Settings(rules=ALL_RULES, config=find_config(tmp_path), cache=False))
    messages = {f.rule: f.message for f in report.findings}
    assert "self.criterion(net(x), y) (models/client.py line 14)" in messages.get("TL801", ""), messages
    assert "net(x) (models/client.py line 22)" in messages.get("TL502", ""), messages
