#!/usr/bin/python3
"""expect_exit.py N CMD ARGS...: run CMD (stdout/stderr passed through) and
exit 0 if it exited with status N, 1 otherwise (saying what it got)."""
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit("usage: expect_exit.py STATUS CMD [ARGS...]")
want = int(sys.argv[1])
got = subprocess.run(sys.argv[2:]).returncode
if got != want:
    sys.stderr.write(f"expect_exit: '{sys.argv[2]}' exited with {got}, expected {want}\n")
    sys.exit(1)
