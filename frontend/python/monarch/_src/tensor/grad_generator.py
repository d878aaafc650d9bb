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
    active when the generator was made (the forward's).

    The backward never stays paused behind a generator nobody will advance:
    handing out the last gradient runs it to its end, and a generator dropped
    (or closed) early aborts it. This matters beyond a leaked thread: with
    CUDA tensors torch runs the hooks on autograd's per-device worker thread,
    which every later backward on that device shares, so one paused hook
    would hang them all (``zip(params, grads)`` never asks for the end)."""

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
        # The helper thread and the hooks hold only the state, never this
        # iterator, so dropping the iterator reaches __del__ and aborts them.
        self._state = _Backward(loss, params, grad)

    def __iter__(self) -> "_GradGenerator":
        return self

    def __next__(self) -> Any:
        st = self._state
        if st.next >= len(st.params):
            st.finish()
            st.raise_error()
            raise StopIteration
        i = st.next
        while i not in st.buf and not st.done:
            st.resume()
        st.raise_error()
        st.next += 1
        g = st.buf.pop(i, None)
        if st.next == len(st.params):
            st.finish()  # its error, if any, comes with the StopIteration
        return g

    def close(self) -> None:
        self._state.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _Backward:
    """The backward pass of one grad generator and its turn-taking with the
    caller."""

    def __init__(self, loss: Any, params: List[Any], grad: Any):
        self.loss = loss
        self.params = params
        self.grad = grad
        self.stream = get_active_stream()
        self.buf: Dict[int, Any] = {}
        self.next = 0
        self.done = False
        self.error: Optional[BaseException] = None
        self.abort = False
        self.cond = threading.Condition()
        self.owner = "caller"
        self.thread: Optional[Any] = None

    def raise_error(self) -> None:
        if self.error is not None:
            e, self.error = self.error, None
            raise e

    def finish(self) -> None:
        """Runs the backward to its end (nothing is left to hand out)."""
        while not self.done:
            self.resume()

    def close(self) -> None:
        if self.thread is not None and not self.done:
            self.abort = True
            self.finish()
        self.error = None

    # -- turns -------------------------------------------------------------------
    def resume(self) -> None:
        prev = set_active_stream(self.stream)
        try:
            with self.cond:
                self.owner = "backward"
                if self.thread is None:
                    self.thread = threading.Thread(
                        target=self.run, name="monarch-grad-generator", daemon=True
                    )
                    self.thread.start()
                self.cond.notify_all()
                self.cond.wait_for(lambda: self.owner == "caller")
        finally:
            set_active_stream(prev)

    def yield_turn(self) -> None:
        with self.cond:
            self.owner = "caller"
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.owner == "backward")

    def producers(self) -> Dict[int, List[Tuple[Any, int]]]:
        """For each param, the backward nodes (and output slots) whose output is
        its gradient: the nodes feeding its AccumulateGrad."""
        index = {id(p): i for i, p in enumerate(self.params)}
        found: Dict[int, List[Tuple[Any, int]]] = {}
        roots = self.loss if isinstance(self.loss, (list, tuple)) else [self.loss]
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

    def run(self) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.owner == "backward")
        handles = []
        try:
            # A param with one producer gets its gradient from that node's
            # post-hook, as soon as it runs; others (used twice, or unused)
            # from the result at the end.
            for i, producers in self.producers().items():
                if len(producers) != 1:
                    continue
                node, k = producers[0]

                def hook(grad_inputs: Any, grad_outputs: Any, i: int = i, k: int = k) -> None:
                    if self.abort:
                        raise _Aborted()
                    self.buf[i] = grad_inputs[k]
                    if i == self.next:
                        self.yield_turn()
                        if self.abort:
                            raise _Aborted()

                handles.append(node.register_hook(hook))
            wanted = [i for i, p in enumerate(self.params) if p.requires_grad]
            mode = CaptureMode() if modes.any_active() else None
            if mode is not None:
                mode.__enter__()
            try:
                grads = torch.autograd.grad(
                    self.loss,
                    [self.params[i] for i in wanted],
                    grad_outputs=self.grad,
                    allow_unused=True,
                )
            finally:
                if mode is not None:
                    mode.__exit__(None, None, None)
            for i, g in zip(wanted, grads):
                if i >= self.next and i not in self.buf:
                    self.buf[i] = g
        except _Aborted:
            pass
        except BaseException as e:  # raised to the caller at its next()
            self.error = e
        finally:
            for h in handles:
                h.remove()
            with self.cond:
                self.done = True
                self.owner = "caller"
                self.cond.notify_all()


class _Aborted(Exception):
    pass


def grad_generator(loss: Any, params: Sequence[Any], grad: Any = None) -> Iterator[Any]:
    """Yields the gradient of each param of ``loss``, in the order given, running
    the backward pass incrementally: pass params in reverse order of use
    (``reversed(list(model.parameters()))``) to get each gradient as soon as
    it is computed, and reduce it while the rest of the backward runs."""
    return _GradGenerator(loss, params, grad)
