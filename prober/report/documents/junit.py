"""`junit.xml` in the shape Prow's Spyglass reads (the one openshift-tests writes).

<testsuites><testsuite name tests failures errors skipped time>
  <properties>...</properties>
  <testcase name classname time><failure message type>details</failure></testcase>
  <testcase ...><skipped message="reason"/></testcase>
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from prober.report.verdicts.counts import cases
from prober.report.verdicts.verdicts import Status, Verdict

SUITE = "prober"


def junit_xml(verdicts: Sequence[Verdict], properties: Mapping[str, str]) -> bytes:
    written = [case for verdict in verdicts for case in cases(verdict)]
    counts = Counter(status for _, status in written)
    totals = {
        "tests": str(len(written)),
        "failures": str(counts[Status.FAILED]),
        "errors": "0",
        "skipped": str(counts[Status.SKIPPED]),
        "time": "0",
    }
    root = ET.Element("testsuites", totals)
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **totals})
    props = ET.SubElement(suite, "properties")
    for name, value in properties.items():
        ET.SubElement(props, "property", {"name": name, "value": value})
    for verdict, status in written:
        case = ET.SubElement(
            suite, "testcase", {"name": verdict.name, "classname": SUITE, "time": "0"}
        )
        if status is Status.FAILED:
            failure = ET.SubElement(
                case, "failure", {"message": verdict.message, "type": "Failure"}
            )
            failure.text = "\n".join(verdict.details or (verdict.message,))
        elif status is Status.SKIPPED:
            ET.SubElement(case, "skipped", {"message": verdict.message})
        else:
            ET.SubElement(case, "system-out").text = verdict.message
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


def write_junit(path: Path, verdicts: Sequence[Verdict], properties: Mapping[str, str]) -> None:
    path.write_bytes(junit_xml(verdicts, properties))
