"""`--output-format sarif`: a SARIF 2.1.0 log (GitHub code scanning, IDE viewers).

One run; `tool.driver.rules` lists every registered rule (stable `ruleIndex`), results
carry physical locations with 1-based lines and code-point columns, and files that could
not be processed become error notifications of the invocation.
https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import quote

from migrator.findings import Finding
from migrator.render.report import RunReport

if TYPE_CHECKING:
    from migrator.rule import Rule

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    """A relative path stays relative (resolved against %SRCROOT%); an absolute one
    becomes a file:// URI."""
    posix = path.replace(os.sep, "/")
    if os.path.isabs(path):
        return "file://" + quote(posix)
    return quote(posix)


def _location(finding: Finding) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": _uri(finding.path)}
    if not os.path.isabs(finding.path):
        artifact["uriBaseId"] = "%SRCROOT%"
    if finding.cell is not None:  # lines in a notebook cell are not lines of the file
        return {"physicalLocation": {"artifactLocation": artifact}, "message": {"text": finding.place}}
    return {
        "physicalLocation": {
            "artifactLocation": artifact,
            "region": {
                "startLine": finding.start.line,
                "startColumn": finding.start.col,
                "endLine": max(finding.end.line, finding.start.line),
                "endColumn": max(finding.end.col, 1),
            },
        }
    }


def rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    """A reportingDescriptor: id, name, descriptions from the rule itself."""
    from migrator.docs import fix_label, rule_summary

    doc = inspect.cleandoc(rule.__doc__ or rule.message)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule_summary(rule)},
        "fullDescription": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"fix": fix_label(rule), "tags": sorted(t.value for t in rule.targets)},
    }


def render(report: RunReport, rules: Sequence[type[Rule]], version: str) -> str:
    """The SARIF log as JSON text."""
    index = {rule.code: i for i, rule in enumerate(rules)}
    results = []
    for finding in report.all_shown():
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "level": "warning",
            "message": {"text": finding.message},
            "locations": [_location(finding)],
        }
        if finding.code in index:
            result["ruleIndex"] = index[finding.code]
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": r.error.message},
            "descriptor": {"id": r.error.code},
            "locations": [_location(r.error)],
        }
        for r in report.failed if r.error is not None
    ]
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "accel-migrate", "version": version, "rules": [rule_descriptor(r) for r in rules]}},
            "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
