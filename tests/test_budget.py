"""The analysis budget (trainlint/static/budget.py): bounded work, and never a silent truncation."""
from __future__ import annotations

from trainlint.static import budget
from trainlint.static.analyzer import analyze_results


def _independent_ifs(n: int) -> str:
    lines = ["import torch", "", "def train(model, loader, optimizer, cfg):", "    for x, y in loader:",
             "        loss = model(x).mean()", "        loss.backward()", "        optimizer.step()"]
    for i in range(n):
        lines += [f"        if cfg.flag_{i}:", f"            torch.nn.utils.clip_grad_norm_(model.parameters(), {i + 1}.0)"]
    lines += ["        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "        optimizer.zero_grad()"]
    return "\n".join(lines) + "\n"


def _nested_loops(depth: int) -> str:
    lines, indent = ["def train(model, loader, optimizer):"], "    "
    for level in range(depth):
        lines.append(f"{indent}for x{level} in loader:")
        indent += "    "
    lines += [f"{indent}model(x0).mean().backward()", f"{indent}optimizer.step()",
              f"{indent}torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", f"{indent}optimizer.zero_grad()"]
    return "import torch\n\n" + "\n".join(lines) + "\n"


def test_eighty_independent_ifs_report_every_finding_or_say_the_analysis_is_incomplete():
    notes = []
    results = analyze_results(_independent_ifs(80), frozenset({"TL101"}), incomplete=notes)
    assert len(results) == 81 or notes


def test_a_path_budget_that_is_hit_is_reported(monkeypatch):
    monkeypatch.setattr(budget, "PATHS", 8)
    notes = []
    analyze_results(_independent_ifs(20), frozenset({"TL101"}), incomplete=notes)
    assert len(notes) == 1 and notes[0].startswith("more than 8 distinct paths at line ")


def test_exploration_out_of_time_keeps_witnessed_findings_and_says_so(monkeypatch):
    monkeypatch.setattr(budget, "SECONDS", 0.0)
    notes = []
    results = analyze_results(_independent_ifs(3), frozenset({"TL101"}), incomplete=notes)
    assert any(note.startswith("path exploration stopped after 0 s") for note in notes)
    assert all(r.rule == "TL101" for r in results)  # nothing but what a witnessed path showed


def test_a_file_within_budget_has_no_note():
    notes = []
    results = analyze_results(_independent_ifs(3), frozenset({"TL101"}), incomplete=notes)
    assert len(results) == 4 and notes == []


def test_deeply_nested_loops_are_explored_once_per_distinct_input():
    # Each level used to re-run the levels inside it: 14 levels took 20 s, 60 would never end.
    notes = []
    results = analyze_results(_nested_loops(60), frozenset({"TL101"}), incomplete=notes)
    assert [r.rule for r in results] == ["TL101"] and notes == []


def test_the_cli_reports_an_incomplete_file_in_every_format_and_keeps_the_exit_code(tmp_path, monkeypatch):
    from cli_support import run, run_json, write
    from jsonschema import validate
    from test_cli import JSON_SCHEMA

    monkeypatch.setattr(budget, "PATHS", 8)
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    path = write(tmp_path, "train.py", _independent_ifs(20))
    cold, data = run_json(str(path))
    validate(data, JSON_SCHEMA)
    assert cold.exit_code == 1 and len(data["incomplete"]) == 1
    assert data["incomplete"][0]["path"].endswith("train.py")
    warm, cached = run_json(str(path))  # the note is cached with the findings
    assert cached == data
    text = run(str(path))
    assert "train.py: note: analysis incomplete: more than 8 distinct paths at line " in text.stderr
    assert text.exit_code == 1


def test_no_incomplete_key_when_nothing_was_left_out(tmp_path):
    from cli_support import run_json, write

    _, data = run_json("--no-cache", str(write(tmp_path, "train.py", _independent_ifs(3))))
    assert "incomplete" not in data


def test_a_helper_chain_deeper_than_the_calls_followed_is_noted():
    lines = ["import torch", "", "def step_0(model, optimizer):", "    optimizer.step()",
             "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"]
    for i in range(1, 12):
        lines += [f"def step_{i}(model, optimizer):", f"    step_{i - 1}(model, optimizer)"]
    lines += ["def train(model, loader, optimizer):", "    for x in loader:", "        model(x).mean().backward()",
              "        step_11(model, optimizer)", "        optimizer.zero_grad()"]
    notes = []
    analyze_results("\n".join(lines) + "\n", frozenset({"TL101"}), incomplete=notes)
    assert any(note.startswith(f"a chain of calls deeper than {budget.CALL_DEPTH}") for note in notes)
