"""--baseline / --write-baseline, and the fingerprints they share with SARIF: a recorded finding
still matches after lines move; only new findings are reported and decide the exit code."""
from __future__ import annotations

import json

from cli_support import BOTH, CLIP_AFTER_STEP, run, run_json, write
from trainlint.fingerprints import KEY, fingerprints, module
from trainlint.findings import Finding

FILLER = "".join(f"print('setting up {i}')\n" for i in range(10))
NEW_BUG = (
    "for x, y in other_loader:\n"
    "    optimizer.zero_grad()\n"
    "    model(x).sum().backward()\n"
    "    optimizer.step()\n"
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)\n"
)


def _moved(source: str) -> str:
    """Ten lines inserted above the findings, so every one of them moves."""
    return source.replace("for x, y in loader:\n", FILLER + "for x, y in loader:\n")


def test_old_findings_match_after_moving_and_only_the_new_one_is_reported(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    baseline = tmp_path / "trainlint-baseline.json"
    written = run("--no-cache", "--write-baseline", baseline, path)
    assert written.exit_code == 0, written.output
    assert "Wrote 2 findings to the baseline" in written.stderr
    assert run("--no-cache", "--baseline", baseline, path).exit_code == 0

    path.write_text(_moved(BOTH) + NEW_BUG, encoding="utf-8")
    _, everything = run_json("--no-cache", path)
    assert sorted((f["rule"], f["line"]) for f in everything["findings"]) == [("TL101", 21), ("TL101", 26), ("TL102", 19)]
    result, data = run_json("--no-cache", "--baseline", baseline, path)
    assert result.exit_code == 1
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 26)]
    text = run("--no-cache", "--baseline", baseline, path)
    assert text.exit_code == 1
    assert "Found 1 finding in 1 file." in text.stderr and "2 findings left out: recorded in" in text.stderr

    path.write_text(_moved(BOTH), encoding="utf-8")  # the move alone: nothing new
    assert run("--no-cache", "--baseline", baseline, path).exit_code == 0


def test_the_baseline_is_sorted_stable_and_has_no_lines(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    run("--no-cache", "--write-baseline", first, path)
    path.write_text(_moved(BOTH).replace("    loss.backward()\n", "    loss.backward()   # comment\n"), encoding="utf-8")
    run("--no-cache", "--write-baseline", second, path)
    assert first.read_bytes() == second.read_bytes()
    document = json.loads(first.read_text())
    assert document["version"] == 1 and document["tool"] == "trainlint"
    assert [sorted(e) for e in document["findings"]] == [["fingerprint", "path", "rule"]] * 2
    assert [e["rule"] for e in document["findings"]] == ["TL101", "TL102"]
    assert {e["path"] for e in document["findings"]} == {"train.py"}  # relative to the baseline


def test_paths_are_relative_to_the_baseline_not_the_working_directory(tmp_path, monkeypatch):
    path = write(tmp_path, "src/train.py", BOTH)
    baseline = tmp_path / "baseline.json"
    run("--no-cache", "--write-baseline", baseline, path)  # an absolute path
    assert {e["path"] for e in json.loads(baseline.read_text())["findings"]} == {"src/train.py"}
    monkeypatch.chdir(tmp_path / "src")
    assert run("--no-cache", "--baseline", "../baseline.json", "train.py").exit_code == 0


def test_identical_findings_are_told_apart_by_occurrence(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP + CLIP_AFTER_STEP.split("\n", 3)[3])
    _, data = run_json("--no-cache", path)
    assert [f["rule"] for f in data["findings"]] == ["TL101", "TL101"]
    baseline = tmp_path / "baseline.json"
    run("--no-cache", "--write-baseline", baseline, path)
    prints = [e["fingerprint"] for e in json.loads(baseline.read_text())["findings"]]
    assert prints[0].split(":")[0] == prints[1].split(":")[0] and {p[-2:] for p in prints} == {":0", ":1"}
    path.write_text(path.read_text() + CLIP_AFTER_STEP.split("\n", 3)[3], encoding="utf-8")  # a third copy
    _, data = run_json("--no-cache", "--baseline", baseline, path)
    assert len(data["findings"]) == 1


def test_a_broken_baseline_is_a_usage_error(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    missing = run("--baseline", tmp_path / "none.json", path)
    assert missing.exit_code == 2 and "cannot read the baseline" in missing.output
    write(tmp_path, "other.json", json.dumps({"version": 1, "findings": []}))
    assert run("--baseline", tmp_path / "other.json", path).exit_code == 2
    write(tmp_path, "future.json", json.dumps({"version": 9, "tool": "trainlint", "findings": []}))
    future = run("--baseline", tmp_path / "future.json", path)
    assert future.exit_code == 2 and "version 9" in future.output


def test_sarif_carries_the_same_fingerprints_and_they_survive_moving(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    baseline = tmp_path / "baseline.json"
    run("--no-cache", "--write-baseline", baseline, path)
    recorded = {(e["rule"], e["fingerprint"]) for e in json.loads(baseline.read_text())["findings"]}

    def sarif():
        results = json.loads(run("--no-cache", "--format", "sarif", path).stdout)["runs"][0]["results"]
        return {(r["ruleId"], r["partialFingerprints"][KEY]) for r in results}

    assert sarif() == recorded
    path.write_text(_moved(BOTH), encoding="utf-8")
    assert sarif() == recorded


def _finding(line: int, message: str, column: int = 5, end_column: int = 60) -> Finding:
    return Finding("train.py", line, column, "TL101", "clip-after-step", "error", message, line, end_column)


def test_fingerprints_read_code_not_layout():
    message = "torch.nn.utils.clip_grad_norm_(...) runs after optimizer.step() (line {}) in the same iteration"
    one = module("for x in y:\n    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")
    two = module("\n\nfor x in y:\n    optimizer.step( )  # step\n    torch.nn.utils.clip_grad_norm_(model.parameters(),1.0)\n")
    first = fingerprints([_finding(3, message.format(2))], lambda _: one)
    moved = fingerprints([_finding(5, message.format(4), end_column=59)], lambda _: two)
    assert first == moved
    # Another clip value, another statement: another fingerprint.
    three = module("for x in y:\n    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)\n")
    assert fingerprints([_finding(3, message.format(2))], lambda _: three) != first
    # The statement the message names counts too.
    four = module("for x in y:\n    other.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")
    assert fingerprints([_finding(3, message.format(2))], lambda _: four) != first
    # A file that cannot be read still gets a fingerprint (rule and masked message).
    assert fingerprints([_finding(3, message.format(2))], lambda _: None)[0].endswith(":0")


def test_notebook_fingerprints_survive_a_new_cell_above(tmp_path):
    from test_notebooks import LOOP, SETUP, notebook

    path = write(tmp_path, "train.ipynb", notebook(SETUP, LOOP))
    baseline = tmp_path / "baseline.json"
    run("--no-cache", "--write-baseline", baseline, path)
    path.write_text(notebook("import os\nprint(os.getcwd())\n", SETUP, LOOP), encoding="utf-8")
    _, data = run_json("--no-cache", path)
    assert [(f["rule"], f["cell"]) for f in data["findings"]] == [("TL101", 4)]
    assert run("--no-cache", "--baseline", baseline, path).exit_code == 0
