"""The three tiers: errors and warnings run by default, advice (advice-tier rules, and the advice
findings of default rules) only when selected, and every output says which tier a finding is."""
from __future__ import annotations

import json

from cli_support import run, run_json, write
from trainlint.catalog import TIERS, load_catalog

# An evaluation that keeps its outputs without no_grad (TL502, a warning), a weights-only checkpoint
# nothing resumes from (TL901's advice finding) and Adam's coupled weight decay (TL702, an
# advice-tier rule).
EVALUATIONS = """\
import torch


def logits(model, loader):
    model.eval()
    kept = []
    for x, _ in loader:
        kept.append(model(x))
    return torch.cat(kept)


def main(model, loader, epochs):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        torch.save({"model": model.state_dict(), "epoch": epoch}, f"ckpt_{epoch}.pt")
"""


def _found(data):
    return {(f["line"], f["rule"], f["tier"], f["severity"]) for f in data["findings"]}


def test_every_rule_has_a_tier_and_advice_rules_are_opt_in():
    for rule in load_catalog().values():
        assert rule.tier in TIERS
        assert rule.opt_in == (rule.tier == "advice")
        assert rule.severity == {"error": "error", "warning": "warning", "advice": "info"}[rule.tier]


def test_default_run_shows_only_the_default_tiers(tmp_path):
    _, data = run_json(write(tmp_path, "evaluate.py", EVALUATIONS))
    assert _found(data) == {(8, "TL502", "warning", "warning")}


def test_extend_select_advice_adds_advice_rules_and_advice_findings(tmp_path):
    _, data = run_json("--extend-select", "ADVICE", write(tmp_path, "evaluate.py", EVALUATIONS))
    assert _found(data) == {
        (8, "TL502", "warning", "warning"), (13, "TL702", "advice", "info"), (19, "TL901", "advice", "info"),
    }


def test_select_advice_alone_runs_only_advice(tmp_path):
    _, data = run_json("--select", "ADVICE", write(tmp_path, "evaluate.py", EVALUATIONS))
    assert {f["rule"] for f in data["findings"]} == {"TL702"}


def test_selecting_a_rule_by_id_shows_its_advice_but_a_prefix_does_not(tmp_path):
    path = write(tmp_path, "evaluate.py", EVALUATIONS)
    _, by_id = run_json("--select", "TL901", path)
    assert {(f["line"], f["tier"]) for f in by_id["findings"]} == {(19, "advice")}
    _, by_prefix = run_json("--select", "TL9", path)
    assert by_prefix["findings"] == []


def test_config_extend_select_advice(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nextend-select = ["ADVICE"]\nignore = ["TL702"]\n')
    _, data = run_json(write(tmp_path, "evaluate.py", EVALUATIONS))
    assert {(f["line"], f["rule"]) for f in data["findings"]} == {(8, "TL502"), (19, "TL901")}


def test_sarif_carries_the_tier_and_advice_is_a_note(tmp_path):
    done = run("--extend-select", "ADVICE", "--format", "sarif", str(write(tmp_path, "evaluate.py", EVALUATIONS)))
    results = json.loads(done.stdout)["runs"][0]["results"]
    levels = {(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["level"], r["properties"]["tier"])
              for r in results}
    assert levels == {(8, "warning", "warning"), (13, "note", "advice"), (19, "note", "advice")}


def test_cache_keeps_default_and_advice_runs_apart(tmp_path):
    path = write(tmp_path, "evaluate.py", EVALUATIONS)
    first = run("--format", "json", str(path))  # with the cache: the default run is stored
    with_advice = run("--format", "json", "--extend-select", "ADVICE", str(path))
    assert len(json.loads(first.stdout)["findings"]) == 1
    assert len(json.loads(with_advice.stdout)["findings"]) == 3
