"""``monarch.grad_generator(loss, params)``: backward run incrementally,
yielding the gradient of each param in the order given (DESIGN.md §6.6), so
that a reduce issued for one overlaps with the rest of the backward."""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from . import modes
from .dispatch import CaptureMode
from .streams import get_active_stream, set_active_stream


class _GradGenerator:
    """Runs backward incrementally: each ``next()`` lets the backward pass
    (on a helper thread, strictly alternating with the caller, so only one of
    them issues operations at a time) run until the next param's gradient is
    computed. Gradients come in the order given; a gradient computed before
    its turn is kept until then. Each backward op runs on the stream that was
    active when the generator was made (the forward's)."""

    def __init__(self, loss: Any, params: Sequence[Any], grad: Any = None):
        losses = loss if isinstance(loss, (list, tuple)) else [loss]
        for x in losses:
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"grad_generator takes the loss as a tensor (or a list of "
                                f"them), got {type(x).__name__}")
        if isinstance(params, (torch.Tensor, str, bytes)) or not hasattr(params, "__iter__"):
            raise TypeError(f"grad_generator takes params as a sequence of tensors, got "
                            f"{type(params).__name__}")
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, torch.Tensor):
                raise TypeError(f"grad_generator's params must be tensors, got "
                                f"{type(p).__name__} at position {i}")
        self._loss = loss
        self._params = params
        self._grad = grad
        self._stream = get_active_stream()
        self._buf: Dict[int, Any] = {}
        self._next = 0
        self._done = False
        self._error: Optional[BaseException] = None
        self._abort = False
        self._cond = threading.Condition()
        self._owner = "caller"
        self._thread: Optional[Any] = None

    def __iter__(self) -> "_GradGenerator":
        return self

    def __next__(self) -> Any:
        if self._next >= len(self._params):
            while not self._done:
                self._resume()
            self._raise()
            raise StopIteration
        i = self._next
        while i not in self._buf and not self._done:
            self._resume()
        self._raise()
        self._next += 1
        return self._buf.pop(i, None)

    def _raise(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def close(self) -> None:
        if self._thread is not None and not self._done:
            self._abort = True
            while not self._done:
                self._resume()
        self._error = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- turns -------------------------------------------------------------------
    def _resume(self) -> None:
        prev = set_active_stream(self._stream)
        try:
            with self._cond:
                self._owner = "backward"
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="monarch-grad-generator", daemon=True
                    )
                    self._thread.start()
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._owner == "caller")
        finally:
            set_active_stream(prev)

    def _yield_turn(self) -> None:
        with self._cond:
            self._owner = "caller"
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._owner == "backward")

    def _producers(self) -> Dict[int, List[Tuple[Any, int]]]:
        """For each param, the backward nodes (and output slots) whose output is
        its gradient: the nodes feeding its AccumulateGrad."""
        index = {id(p): i for i, p in enumerate(self._params)}
        found: Dict[int, List[Tuple[Any, int]]] = {}
        roots = self._loss if isinstance(self._loss, (list, tuple)) else [self._loss]
        stack = [t.grad_fn for t in roots if t.grad_fn is not None]
        seen = set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            for k, (nxt, _) in enumerate(node.next_functions):
                if nxt is None:
                    continue
                if type(nxt).__name__ == "AccumulateGrad":
                    i = index.get(id(nxt.variable))
                    if i is not None:
                        found.setdefault(i, []).append((node, k))
                else:
                    stack.append(nxt)
        return found

    def _run(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._owner == "backward")
        handles = []
        try:
            # A param with one producer gets its gradient from that node's
            # post-hook, as soon as it runs; others (used twice, or unused)
            # from the result at the end.
            for i, producers in self._producers().items():
                if len(producers) != 1:
                    continue
                node, k = producers[0]

                def hook(grad_inputs: Any, grad_outputs: Any, i: int = i, k: int = k) -> None:
                    if self._abort:
                        raise _Aborted()
                    self._buf[i] = grad_inputs[k]
                    if i == self._next:
                        self._yield_turn()
                        if self._abort:
                            raise _Aborted()

                handles.append(node.register_hook(hook))
            wanted = [i for i, p in enumerate(self._params) if p.requires_grad]
            mode = CaptureMode() if modes.any_active() else None
            if mode is not None:
                mode.__enter__()
            try:
                grads = torch.autograd.grad(
                    self._loss,
                    [self._params[i] for i in wanted],
                    grad_outputs=self._grad,
                    allow_unused=True,
                )
            finally:
                if mode is not None:
                    mode.__exit__(None, None, None)
            for i, g in zip(wanted, grads):
                if i >= self._next and i not in self._buf:
                    self._buf[i] = g
        except _Aborted:
            pass
        except BaseException as e:  # raised to the caller at its next()
            self._error = e
        finally:
            for h in handles:
                h.remove()
            with self._cond:
                self._done = True
                self._owner = "caller"
                self._cond.notify_all()


class _Aborted(Exception):
    pass


def grad_generator(loss: Any, params: Sequence[Any], grad: Any = None) -> Iterator[Any]:
    """Yields the gradient of each param of ``loss``, in the order given, running
    the backward pass incrementally: pass params in reverse order of use
    (``reversed(list(model.parameters()))``) to get each gradient as soon as
    it is computed, and reduce it while the rest of the backward runs."""
    return _GradGenerator(loss, params, grad)
