#!/usr/bin/env python3
"""Sums JUnit XML reports (lit, ctest, pytest) into one closing line:
"N passed, N failed, N skipped". Exits 1 when any test failed."""
import sys
import xml.etree.ElementTree as ET


def count(path: str) -> tuple[int, int, int]:
    passed = failed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed += 1
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(paths: list[str]) -> int:
    totals = [0, 0, 0]
    for path in paths:
        try:
            counts = count(path)
        except (OSError, ET.ParseError) as err:
            print(f"junit-summary: cannot read {path}: {err}")
            totals[1] += 1
            continue
        print(f"  {path}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
        totals = [a + b for a, b in zip(totals, counts)]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] or not sum(totals) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
