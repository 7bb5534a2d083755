"""SARIF 2.1.0 for code-scanning services (GitHub code scanning and others)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .. import __version__
from ..catalog import load_catalog
if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "https://github.com/trainlint/trainlint/blob/main/{path}"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _rule(rule) -> dict:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.rationale},
        "help": {"text": rule.fix},
        "helpUri": DOCS.format(path=rule.doc_path),
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["training-correctness"], "runtime_confirmed": rule.runtime_confirmed, "tier": rule.tier},
    }


def document(report: Report) -> dict:
    from ..fingerprints import KEY, fingerprints  # reads the flagged files again: only for SARIF

    rules = list(load_catalog().values())
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = []
    # Identities that survive moving lines, so code scanning tracks a finding across commits.
    for f, fingerprint in zip(report.findings, fingerprints(report.findings)):
        location = {
            "physicalLocation": {
                "artifactLocation": {"uri": f.path},
                "region": {"startLine": f.line, "startColumn": f.column, "endLine": f.end_line, "endColumn": f.end_column},
            }
        }
        result = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [location],
            "partialFingerprints": {KEY: fingerprint},
        }
        result["properties"] = {"tier": f.tier}
        if f.cell is not None:
            result["properties"]["notebookCell"] = f.cell
        results.append(result)
    notifications = [
        {"level": "error", "message": {"text": e.message}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": e.path}}}]}
        for e in report.errors
    ] + [
        {"level": "warning", "message": {"text": f"analysis incomplete: {n.message}"},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": n.path}}}]}
        for n in report.incomplete
    ]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "trainlint", "version": __version__, "informationUri": DOCS.format(path="README.md"), "rules": [_rule(r) for r in rules]}},
                "invocations": [{"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}],
                "results": results,
            }
        ],
    }


def render(report: Report, color: bool = False) -> str:
    return json.dumps(document(report), indent=2) + "\n"
