"""Worker processes a guarded program starts are checked too. Workers of the spawn and forkserver
methods (torch.multiprocessing.spawn, multiprocessing contexts) run under a guard of their own, and
their findings come back to the parent's summary and report, tagged with the worker. A worker that
dies, or that the guard cannot follow (a fork), is an error of the report, never a clean run.
DataLoader workers are not training processes: nothing is said about them."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from fixture_expectations import expected_findings
from test_cli import JSON_SCHEMA
from trainlint.catalog import load_catalog
from trainlint.runtime.rules import checkable
from trainlint.static.analyzer import analyze

PROGRAMS = Path(__file__).resolve().parent / "workers"


def trainlint_run(script: Path, report: Path, *options: str, args=()):
    """``trainlint run OPTIONS --report REPORT SCRIPT ARGS`` in the script's directory: its result
    and the validated report."""
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one thread per process, or gloo crawls on 2 cores
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)  # DETAIL segfaults DDP on gloo CPU
    result = subprocess.run([sys.executable, "-m", "trainlint", "run", *options, "--report", str(report), script.name, *args],
                            cwd=script.parent, env=env, capture_output=True, text=True, timeout=180)
    data = json.loads(report.read_text())
    jsonschema.validate(data, JSON_SCHEMA)
    return result, data


@pytest.mark.parametrize("name, workers", [
    ("spawn_ddp_bad_no_set_epoch.py", 2),  # torch.multiprocessing.spawn, DDP on gloo
    ("spawn_ddp_good_set_epoch.py", 2),
    ("processes_spawn_and_forkserver.py", 3),  # a target, a Process subclass, a run set on the object
])
def test_each_worker_reports_its_findings_at_the_users_line(name, workers, tmp_path):
    program = PROGRAMS / name
    result, data = trainlint_run(program, tmp_path / "findings.json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert data["errors"] == []
    expected = expected_findings(program.read_text(encoding="utf-8"))
    found = {w: {(f["line"], f["rule"]) for f in data["findings"] if f["worker"] == w} for w in range(workers)}
    assert found == {w: expected for w in range(workers)}
    assert len(data["findings"]) == workers * len(expected)
    for f in data["findings"]:
        assert f["path"] == name and f["message"].startswith(f"[worker {f['worker']}] ")
    # The text summary (warn mode) merges them too, one line per finding and worker.
    summary = re.findall(r"^  (\S+):(\d+):1: (TL\d+) [a-z-]+ \(\d+ times?, worker (\d+)\)$", result.stderr, re.M)
    assert sorted(summary) == sorted((name, str(line), rule, str(w)) for line, rule in expected for w in range(workers))
    if not expected:
        assert "trainlint:" not in result.stderr
    # The static analyzer says the same about the same program.
    both = checkable() - {r.id for r in load_catalog().values() if not r.static}
    assert {(span[0], rule) for rule, span, _ in analyze(program.read_text(encoding="utf-8"), both)} == expected


def test_a_worker_killed_by_a_signal_is_an_error(tmp_path):
    result, data = trainlint_run(PROGRAMS / "spawn_worker_killed.py", tmp_path / "findings.json", "--mode", "collect")
    assert result.returncode == 1 and "ProcessExitedException" in result.stderr  # spawn raises in the parent
    # torch.multiprocessing.spawn then terminates worker 0 unless it has ended: an error of its own if so.
    killed = [e for e in data["errors"] if e["worker"] == 1]
    message = "worker 1 started at line 23 was killed by signal SIGKILL: its training was not checked"
    assert killed == [{"path": "spawn_worker_killed.py", "message": message, "worker": 1}]
    assert f"trainlint: spawn_worker_killed.py: {message}\n" in result.stderr


FORKED = textwrap.dedent('''
    import torch
    import torch.multiprocessing as mp


    def worker(rank):
        torch.set_num_threads(1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(2, 4)).sum().backward()
            optimizer.step()  # no zero_grad: a TL105 in a process the guard does not follow


    if __name__ == "__main__":
        mp.start_processes(worker, nprocs=1, start_method="fork")
''')


def test_forked_workers_are_errors_not_a_clean_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(FORKED)
    for options in ((), ("--mode", "collect")):
        result, data = trainlint_run(script, tmp_path / "findings.json", *options)
        assert result.returncode == 0, result.stderr
        assert data["findings"] == []
        [error] = data["errors"]
        assert error["path"] == "train.py" and error["worker"] == 0
        assert error["message"].startswith("worker 0 started at line 16 was not checked: it was started with the "
                                           "fork method")
        assert f"trainlint: train.py: {error['message']}\n" in result.stderr


GUARD_IN_SCRIPT = textwrap.dedent('''
    import multiprocessing

    import torch
    import torch.multiprocessing as mp

    import trainlint


    def worker(rank):
        torch.set_num_threads(1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(2, 4)).sum().backward()
            optimizer.step()


    if __name__ == "__main__":
        with trainlint.guard(mode="collect") as g:
            mp.spawn(worker, nprocs=1)
            unpicklable = multiprocessing.get_context("spawn").Process(target=lambda: None)
            try:
                unpicklable.start()
            except Exception as exc:
                print("start failed:", type(exc).__name__, "run left on the object:", "run" in vars(unpicklable))
        print([(f.rule, f.line, f.worker) for f in g.findings], g.errors)
''')


def test_a_guard_in_the_script_follows_its_workers(tmp_path):
    """``trainlint.guard()`` in the parent, without ``trainlint run``; a start() that fails leaves
    the process object as it was."""
    (tmp_path / "train.py").write_text(GUARD_IN_SCRIPT)
    result = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "start failed: PicklingError run left on the object: False",
        "[('TL105', 16, 0)] []",
    ]


LOADER_WORKERS = textwrap.dedent('''
    import sys

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if __name__ == "__main__":
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4, num_workers=1,
                            multiprocessing_context=sys.argv[1])
        for (x,) in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
''')


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_are_not_training_processes(tmp_path, method):
    script = tmp_path / "train.py"
    script.write_text(LOADER_WORKERS)
    result, data = trainlint_run(script, tmp_path / "findings.json", args=[method])
    assert result.returncode == 0, result.stderr
    assert data == {"version": 1, "findings": [], "errors": []}
    assert "worker" not in result.stderr


def test_a_worker_that_could_not_import_trainlint_is_not_followed(monkeypatch, tmp_path):
    """Such a worker is reported as not checked instead of failing to start (``trainlint run`` from
    an uninstalled checkout's root, with the script elsewhere: the script's directory replaces the
    root in ``sys.path``)."""
    import importlib.machinery

    from trainlint.runtime.workers import importable_in_workers

    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setattr(sys, "meta_path", [importlib.machinery.PathFinder])  # no editable install's finder
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert not importable_in_workers()
    monkeypatch.setattr(sys, "path", [str(tmp_path), root])
    assert importable_in_workers()
