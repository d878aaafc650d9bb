"""``python -m monarch.trace SCRIPT [-o OUT.mlir] [--verify] [-- ARGS...]``:
runs a whole script with tracing on -- meshes it spawns start no workers and
every operation is written as monarch dialect IR."""

from __future__ import annotations

import runpy
import sys
from typing import List, Optional

from .trace_api import Trace
from .tracing import Recording, tracing


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m monarch.trace SCRIPT [-o OUT.mlir] [--verify] [-- SCRIPT ARGS...]"
    output, verify, script, script_args = "-", False, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            script_args.extend(argv[i + 1:])
            break
        if a in ("-o", "--output"):
            if i + 1 >= len(argv):
                print(usage, file=sys.stderr)
                return 2
            output = argv[i + 1]
            i += 2
            continue
        if a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a == "--verify":
            verify = True
        elif a in ("-h", "--help"):
            print(usage)
            return 0
        elif script is None:
            script = a
        else:
            script_args.append(a)
        i += 1
    if script is None:
        print(usage, file=sys.stderr)
        return 2

    class ns:
        pass

    ns.script, ns.args, ns.output, ns.verify = script, script_args, output, verify
    recording = Recording()
    saved = sys.argv
    sys.argv = [ns.script] + list(ns.args)
    try:
        with tracing(recording):
            runpy.run_path(ns.script, run_name="__main__")
    finally:
        sys.argv = saved
    t = Trace(recording.traced("main"))
    text = t.to_mlir()
    if ns.verify:
        t.verify()
    if ns.output == "-":
        sys.stdout.write(text)
    else:
        with open(ns.output, "w") as f:
            f.write(text)
    return 0
