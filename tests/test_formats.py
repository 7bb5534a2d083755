"""SARIF (validated against the official 2.1.0 schema), GitHub annotations, --output-file."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from cli_support import BOTH, run, write
from trainlint.catalog import load_catalog

SARIF_SCHEMA = Path(__file__).resolve().parents[1].parent / "shared" / "schemas" / "sarif-schema-2.1.0.json"


def _sarif(tmp_path):
    write(tmp_path, "train.py", BOTH)
    write(tmp_path, "broken.py", "def f(:\n")
    result = run("--format", "sarif", tmp_path)
    return result, json.loads(result.stdout)


@pytest.mark.skipif(not SARIF_SCHEMA.is_file(), reason="the official SARIF schema lives in ../shared/schemas/, absent here")
def test_sarif_validates_against_the_official_schema(tmp_path):
    _, document = _sarif(tmp_path)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(document, schema)


def test_sarif_content(tmp_path):
    result, document = _sarif(tmp_path)
    assert result.exit_code == 2
    run_ = document["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(load_catalog())
    assert all(r["helpUri"].endswith(f"rules/{r['id']}-{r['name']}.toml") for r in rules)
    results = run_["results"]
    assert {(r["ruleId"], r["level"]) for r in results} == {("TL101", "error"), ("TL102", "error")}
    clip = next(r for r in results if r["ruleId"] == "TL101")
    assert rules[clip["ruleIndex"]]["id"] == "TL101"
    region = clip["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (11, 5)
    notifications = run_["invocations"][0]["toolExecutionNotifications"]
    assert notifications[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("broken.py")


def test_github_annotations(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    result = run("--format", "github", path)
    assert result.exit_code == 1
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith(f"::error file={path.as_posix()},line=9,col=5,endLine=9,endColumn=21,title=TL102::[scheduler-before-step] ")
    assert lines[1].startswith(f"::error file={path.as_posix()},line=11,col=5,")
    assert all("\n" not in line and "%0A" not in line for line in lines)


def test_output_file(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    result = run("--format", "json", "--output-file", report, path)
    assert result.exit_code == 1 and result.stdout == ""
    assert {f["rule"] for f in json.loads(report.read_text())["findings"]} == {"TL101", "TL102"}
