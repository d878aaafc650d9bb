"""The Python worker process's entry point (``python -u .../monarch/_src/bootstrap.py``;
docs/python.md "How it is built"). It sits above the layers: a Python
tensor worker needs torch and the tensor worker's extension, an actor worker
neither.

Started by the runtime's local launcher through a launcher script
(``common/python_workers.py``), or by a host agent with the same command. It
puts the controller's ``sys.path`` in place (``$MONARCH_PYTHON_PATH``),
imports ``monarch._actors`` -- registering the C++ actor class
"monarch.PythonActor", whose calls land in ``monarch._src.actor.worker`` --
and, for a Python tensor worker (``$MONARCH_WORKER_KIND=tensor``), first torch
and ``monarch._tensor_worker`` (the C++ TensorWorker in this process, able to
run Python functions); then serves through the C++ worker main
(``monarch::runWorker()``, with the GIL released). Importing ``monarch``
costs nothing: the package's public names load lazily, so a worker that
hosts only actors does not import torch until an actor does.
"""

import os
import sys


def _serve() -> int:
    here = os.path.dirname(os.path.realpath(__file__))
    root = os.environ.get("MONARCH_PYTHON_ROOT") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # sys.path[0] is this script's directory (inside the package): drop it.
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    if root not in sys.path:
        sys.path.insert(0, root)
    for entry in os.environ.get("MONARCH_PYTHON_PATH", "").split(os.pathsep):
        if entry and entry not in sys.path and os.path.realpath(entry) != here:
            sys.path.append(entry)
    if os.environ.get("MONARCH_WORKER_KIND") == "tensor":
        import torch  # noqa: F401  (before the extension: it links libtorch_python)

        from monarch import _tensor_worker  # type: ignore[attr-defined]  # noqa: F401
    from monarch import _actors  # type: ignore[attr-defined]

    if not _actors.is_worker_process():
        print("monarch bootstrap: start it through spawn (no bootstrap)", file=sys.stderr)
        return 2
    return _actors.run_worker()


if __name__ == "__main__":
    sys.exit(_serve())
