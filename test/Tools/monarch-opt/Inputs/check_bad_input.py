"""Runs monarch-opt on bad input and checks it fails cleanly.

Usage:
  check_bad_input.py exit TOOL FILE            exit status 1 with an error
  check_bad_input.py truncate TOOL FILE N      every N-th prefix of FILE
  check_bad_input.py mutate TOOL FILE COUNT    COUNT seeded byte mutations

A clean failure is exit status 1 with "error" on stderr, within 10 s; a
signal, another status or a timeout is a bug. Mutated input may also parse
(status 0).
"""
import os
import random
import subprocess
import sys
import tempfile


def run(tool, data, allow_success=False, what=""):
    with tempfile.NamedTemporaryFile(delete=False, suffix=".mlirbc") as f:
        f.write(data)
        path = f.name
    try:
        proc = subprocess.run([tool, path, "-o", os.devnull],
                              capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: monarch-opt hung on {what}")
    finally:
        os.unlink(path)
    if proc.returncode == 0 and allow_success:
        return
    if proc.returncode != 1 or b"error" not in proc.stderr:
        sys.exit(f"FAIL: {what}: exit status {proc.returncode}, stderr:\n"
                 + proc.stderr.decode(errors="replace")[-2000:])


def main():
    mode, tool, path = sys.argv[1:4]
    data = open(path, "rb").read()
    if mode == "exit":
        run(tool, data, what=path)
        print(f"ok: {path} fails cleanly")
    elif mode == "truncate":
        step = int(sys.argv[4])
        count = 0
        for n in range(1, len(data) - 1, step):
            run(tool, data[:n], what=f"{path} truncated to {n} bytes")
            count += 1
        print(f"ok: {count} truncations fail cleanly")
    elif mode == "mutate":
        rng = random.Random(1234)
        count = int(sys.argv[4])
        for i in range(count):
            buf = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            run(tool, bytes(buf), allow_success=True, what=f"mutation {i}")
        print(f"ok: {count} mutations handled")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
