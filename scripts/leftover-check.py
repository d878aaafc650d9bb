#!/usr/bin/env python3
"""After the test suites: nothing they started or made may be left behind.

scripts/test.sh runs every suite with TMPDIR set to a fresh directory and
MONARCH_TEST_RUN set to a token that every process of the run inherits
(workers too: the launcher passes the environment on). This checks, waiting
up to --wait seconds for processes that are just dying (PR_SET_PDEATHSIG),
that no process carrying the token is left and that the directory holds
nothing but pytest's own base directory (pytest keeps its last runs' by
design), and writes the outcome as one JUnit test case so that the suite
summary counts it.

    leftover-check.py --tmpdir DIR --token TOKEN --junit OUT.xml [--wait 10]
"""
import argparse
import os
import sys
import time
from xml.sax.saxutils import escape


def processes_with(token: str) -> list:
    """(pid, command line) of every process whose environment holds the token,
    other than this one and its ancestors (the test script itself)."""
    mine = set()
    pid = os.getpid()
    while pid > 1:
        mine.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found = []
    needle = f"MONARCH_TEST_RUN={token}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie: already dead, its parent will reap it
        except OSError:
            continue
        found.append((int(entry), cmd.strip()))
    return found


def leftover_entries(tmpdir: str) -> list:
    return sorted(e for e in os.listdir(tmpdir) if not e.startswith("pytest-of-"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmpdir", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--junit", required=True)
    ap.add_argument("--wait", type=float, default=10.0)
    args = ap.parse_args()
    deadline = time.monotonic() + args.wait
    while True:
        procs = processes_with(args.token)
        entries = leftover_entries(args.tmpdir)
        if (not procs and not entries) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    problems = [f"process {pid} still running: {cmd}" for pid, cmd in procs]
    problems += [f"left in TMPDIR: {os.path.join(args.tmpdir, e)}" for e in entries]
    for p in problems:
        print(f"leftover-check: {p}")
    body = ""
    if problems:
        body = f'<failure message="left behind">{escape(chr(10).join(problems))}</failure>'
    with open(args.junit, "w") as f:
        f.write('<?xml version="1.0"?>\n<testsuite name="leftovers">'
                f'<testcase classname="leftovers" name="NothingLeftBehind">{body}'
                "</testcase></testsuite>\n")
    if not problems:
        print("leftover-check: no process, directory or file left behind")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
