"""``traceq check --junit``: the budgets as JUnit XML, the test report CI systems read.

One ``<testsuite name="traceq check">`` in a ``<testsuites>`` root; one ``<testcase>`` per budget
(``classname="traceq.check"``, ``name`` the budget and its limit), with a ``<failure>`` whose
``message`` is the figure where the budget failed, and the figure in ``<system-out>`` either way.
The attributes Jenkins, GitLab and GitHub's test reporters read (``tests``, ``failures``,
``errors``, ``skipped``) are on both levels.  XML 1.0 cannot hold most control characters, so the
strings a trace put in (a finding's title, its name) have theirs spelled as escapes
(:func:`traceq.units.printable`; lone surrogates, U+FFFE and U+FFFF too); :mod:`xml.etree` escapes the rest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Final

from traceq.diff.check import CheckResult
from traceq.units import printable

_NOT_XML: Final = re.compile("[\ud800-\udfff\ufffe\uffff]")
"""What XML 1.0 cannot hold beyond the control characters: lone surrogates, U+FFFE and U+FFFF."""


def _text(value: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", printable(value))


def junit_xml(result: CheckResult) -> str:
    """The JUnit XML document of ``result`` (a ``str`` with its XML declaration; write it as UTF-8)."""
    failures = sum(not r.held for r in result.results)
    counts = {"tests": str(len(result.results)), "failures": str(failures), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": "traceq check", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "traceq check", **counts})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "trace", "value": _text(result.trace)})
    if result.baseline is not None:
        ET.SubElement(properties, "property", {"name": "baseline", "value": _text(result.baseline)})
    for r in result.results:
        case = ET.SubElement(suite, "testcase", {"classname": "traceq.check", "name": _text(f"{r.name} {r.limit}")})
        if not r.held:
            failure = ET.SubElement(case, "failure", {"message": _text(r.figure), "type": "budget exceeded"})
            failure.text = _text(f"{r.name} {r.limit} failed: {r.figure}")
        ET.SubElement(case, "system-out").text = _text(r.figure)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
