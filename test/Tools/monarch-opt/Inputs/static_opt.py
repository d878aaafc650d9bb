"""Checks for monarch-opt-static (test/Tools/monarch-opt/static.test).

Usage:
  static_opt.py needed BINARY
      BINARY's dynamic dependencies (readelf -d, NEEDED) are glibc's only: it
      must run where there is no MLIR, LLVM, protobuf, zlib or libstdc++ of
      the right version (the GPU machine).
  static_opt.py same [--exit N] REFERENCE CANDIDATE -- ARGS...
      Runs REFERENCE ARGS and CANDIDATE ARGS, each with @OUT@ in ARGS
      replaced by a file of its own, and fails unless the exit statuses (N
      when given), stdout, stderr and the @OUT@ files are identical byte for
      byte. With status 0, @OUT@ (when used) must not be empty, so that an
      identical nothing does not pass.
  static_opt.py help REFERENCE CANDIDATE
      The pass registry (the "Compiler passes to run" block of --help) is the
      same, and so is every --mlir-* option. (The shared libLLVM.so also
      brings LLVM's code generator options into the reference's --help; the
      static binary links no code generator, so only those may differ.)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# glibc's own libraries; libstdc++ and libgcc_s are linked statically on
# purpose (-static-libstdc++ -static-libgcc), so they are not allowed either.
ALLOWED = {
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def fail(message):
    sys.exit(f"FAIL: {message}")


def needed(binary):
    readelf = shutil.which("readelf") or shutil.which("llvm-readelf")
    if not readelf:
        fail("neither readelf nor llvm-readelf on PATH")
    out = subprocess.run([readelf, "-d", binary], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"readelf -d {binary}: {out.stderr}")
    libs = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)
    if not libs:
        fail(f"{binary} has no NEEDED entries: not a dynamically linked glibc executable?")
    bad = [lib for lib in libs if lib not in ALLOWED]
    if bad:
        fail(f"{binary} needs {', '.join(bad)} (allowed: glibc only)")
    print(f"needed: {' '.join(libs)}")


def run(tool, args, out):
    argv = [tool] + [a.replace("@OUT@", out) for a in args]
    p = subprocess.run(argv, capture_output=True, timeout=300)
    # A message that names the tool by its path differs by that only.
    norm = lambda b: b.replace(tool.encode(), b"TOOL")
    data = open(out, "rb").read() if os.path.exists(out) else None
    return p.returncode, norm(p.stdout), norm(p.stderr), data


def same(argv):
    want = None
    if argv[0] == "--exit":
        want = int(argv[1])
        argv = argv[2:]
    reference, candidate, sep, *args = argv
    if sep != "--":
        fail("usage: same [--exit N] REFERENCE CANDIDATE -- ARGS...")
    with tempfile.TemporaryDirectory() as d:
        a = run(reference, args, os.path.join(d, "reference.out"))
        b = run(candidate, args, os.path.join(d, "candidate.out"))
    what = ["exit status", "stdout", "stderr", "@OUT@ file"]
    for name, x, y in zip(what, a, b):
        if x != y:
            fail(f"{name} differs:\n  {reference}: {x!r:.2000}\n  {candidate}: {y!r:.2000}")
    if want is not None and a[0] != want:
        fail(f"exit status {a[0]}, expected {want}; stderr: {a[2][-2000:]!r}")
    if a[0] == 0 and any("@OUT@" in x for x in args) and not a[3]:
        fail("exit status 0 but @OUT@ is empty or missing")
    print(f"same: exit {a[0]}, {len(a[1])} bytes of stdout, {len(a[2])} of stderr, "
          f"{len(a[3] or b'')} of @OUT@")


def passes_and_mlir_options(tool):
    text = subprocess.run([tool, "--help"], capture_output=True, text=True, check=True).stdout
    raw = text.splitlines()
    # The pass list is a block of "General options:" that starts at
    # "  Compiler passes to run" and is indented deeper than the options around
    # it; it ends at the next option of the outer level ("  --x").
    start = next(i for i, l in enumerate(raw) if l.strip() == "Compiler passes to run")
    end = next((i for i in range(start + 1, len(raw))
                if re.match(r"^  --", raw[i]) or not raw[i].startswith("  ")), len(raw))
    norm = lambda l: re.sub(r"\s+", " ", l).strip()
    passes = [norm(l) for l in raw[start:end]]
    mlir = sorted(norm(l) for l in raw if re.match(r"^  --mlir-", l))
    return passes, mlir


def help_(reference, candidate):
    p1, m1 = passes_and_mlir_options(reference)
    p2, m2 = passes_and_mlir_options(candidate)
    if len(p1) < 20 or len(m1) < 10:
        fail(f"{reference} --help lists too little ({len(p1)} pass lines, {len(m1)} --mlir- options)")
    if p1 != p2:
        fail("the pass registries differ:\n" + "\n".join(
            sorted(set(p1) ^ set(p2))))
    if m1 != m2:
        fail("the --mlir-* options differ:\n" + "\n".join(sorted(set(m1) ^ set(m2))))
    print(f"help: {len(p1)} pass lines and {len(m1)} --mlir- options alike")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        fail(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "needed" and len(rest) == 1:
        needed(rest[0])
    elif cmd == "same":
        same(rest)
    elif cmd == "help" and len(rest) == 2:
        help_(*rest)
    else:
        fail(__doc__)
