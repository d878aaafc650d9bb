"""Eager execution of the seed programs (both backends), on the test device.

Tests that build tensors take ``device`` (conftest: $MONARCH_TEST_DEVICE) and
check with ``placed_on`` that the workers really put them there (the
``source_device`` of a fetch). Fetched values always come back on the CPU, so
expectations are computed on the CPU.
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch.nn as nn

import monarch
import programs
from conftest import placed_on
from monarch import fetch_shard


def on(fut, device):
    """The value of a fetch, after checking the worker held it on ``device``."""
    value = fut.get()
    assert fut.source_device.startswith(placed_on(device)), (fut.source_device, device)
    assert value.device.type == "cpu"  # fetched values always land on the CPU
    return value


def test_outside_activate_is_local(spawn, device):
    mesh = spawn({"gpu": 2})
    local_t = torch.rand(3, 4)
    assert type(local_t) is torch.Tensor
    with mesh.activate():
        t = torch.rand(3, 4, device=device)
    assert isinstance(t, monarch.Tensor)
    assert t.shape == (3, 4) and t.dtype == torch.float32
    assert type(torch.ones(2) + 1) is torch.Tensor


def test_activate_rand_matmul_fetch(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            t = torch.rand(3, 4, device=device)
            dist_compute = t @ t.T
    shards = {}
    for h in range(2):
        for g in range(2):
            shards[h, g] = on(fetch_shard(t, host=h, gpu=g), device)
            assert shards[h, g].shape == (3, 4)
            got = on(fetch_shard(dist_compute, host=h, gpu=g), device)
            # cuBLAS sums in another order than the CPU (and may use TF32 where
            # a build enables it): a relative 1e-4 on CUDA, torch's default
            # tolerance on the CPU.
            rtol = 1e-4 if placed_on(device) == "cuda" else 1e-5
            assert torch.allclose(got, shards[h, g] @ shards[h, g].T, rtol=rtol)
    # every rank holds its own copy: random values differ between ranks
    assert not torch.equal(shards[0, 0], shards[0, 1])
    assert torch.equal(monarch.inspect(t), shards[0, 0])
    assert torch.equal(monarch.inspect(t, gpu=1), shards[0, 1])
    assert torch.equal(fetch_shard(t, {"host": 1}, gpu=1).get(), shards[1, 1])


def test_show(spawn, capsys, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        t = torch.full((2,), 7.0, device=device) + mesh.rank("gpu")
    monarch.show(t, gpu=1)
    assert "8." in capsys.readouterr().out


def test_fetch_coordinate_errors(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    with mesh.activate():
        t = torch.ones(2, device=device)
    with pytest.raises(KeyError):
        fetch_shard(t, hosts=0)
    with pytest.raises(IndexError):
        fetch_shard(t, gpu=2)


def test_rank(spawn):
    mesh = spawn({"host": 2, "gpu": 3})
    g = mesh.rank("gpu")
    hg = mesh.rank(("host", "gpu"))
    assert g.shape == () and g.dtype == torch.int64
    for h in range(2):
        for k in range(3):
            assert monarch.inspect(g, host=h, gpu=k).item() == k
            assert monarch.inspect(hg, host=h, gpu=k).item() == h * 3 + k
    with pytest.raises(KeyError):
        mesh.rank("nope")


def _values(mesh, device):
    """x on rank (h, g) = [1, 2, 3, 4] * (10h + g + 1), on ``device``."""
    with mesh.activate():
        scale = mesh.rank("host") * 10 + mesh.rank("gpu") + 1  # 0-d, CPU
        return torch.arange(1.0, 5.0, device=device) * scale


def _local(h, g):
    return torch.arange(1.0, 5.0) * (10 * h + g + 1)


@pytest.mark.parametrize("dims", ["gpu", "host", ("host", "gpu"), ()])
@pytest.mark.parametrize("reduction", ["sum", "avg", "min", "max", "product"])
def test_reduce_values(spawn, dims, reduction, device):
    mesh = spawn({"host": 2, "gpu": 2})
    x = _values(mesh, device)
    with mesh.activate():
        r = x.reduce(dims, reduction)
    names = [dims] if isinstance(dims, str) else list(dims) or ["host", "gpu"]
    for h in range(2):
        for g in range(2):
            group = [
                _local(hh, gg)
                for hh in range(2)
                for gg in range(2)
                if ("host" in names or hh == h) and ("gpu" in names or gg == g)
            ]
            st = torch.stack(group)
            expect = {
                "sum": st.sum(0),
                "avg": st.sum(0) / len(group),
                "min": st.min(0).values,
                "max": st.max(0).values,
                "product": st.prod(0),
            }[reduction]
            got = on(fetch_shard(r, host=h, gpu=g), device)
            assert torch.allclose(got, expect)


def test_reduce_stack_scatter(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    x = _values(mesh, device)
    with mesh.activate():
        st = x.reduce("gpu", "stack")
        rs = x.reshape(2, 2).reduce("gpu", "sum", scatter=True)
        a2a = x.reshape(2, 2).reduce("host", "stack", scatter=True)
        y = x.clone()
        y.reduce_("host", "max")
        out = torch.zeros(4, device=device)
        x.reduce("gpu", "sum", out=out)
    assert st.shape == (2, 4) and rs.shape == (2,) and a2a.shape == (2, 2)
    assert torch.equal(monarch.inspect(st, host=1), torch.stack([_local(1, 0), _local(1, 1)]))
    total = (_local(0, 0) + _local(0, 1)).reshape(2, 2)
    assert torch.equal(monarch.inspect(rs, gpu=0), total[0])
    assert torch.equal(monarch.inspect(rs, gpu=1), total[1])
    # all-to-all over host: rank h gets block h of every host's input
    expect = torch.cat([_local(0, 1).reshape(2, 2)[1:], _local(1, 1).reshape(2, 2)[1:]])
    assert torch.equal(monarch.inspect(a2a, host=1, gpu=1), expect)
    assert torch.equal(monarch.inspect(y, host=0, gpu=1), _local(1, 1))
    assert torch.equal(monarch.inspect(out, host=1, gpu=0), _local(1, 0) + _local(1, 1))
    # monarch.reduce over a pytree
    tree = monarch.reduce({"a": x, "b": [x * 2]}, "gpu", "sum")
    assert torch.equal(monarch.inspect(tree["b"][0]), 2 * (_local(0, 0) + _local(0, 1)))
    for t in (st, rs, a2a, y, out, tree["a"]):
        on(fetch_shard(t, host=1, gpu=1), device)


def test_reduce_errors(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    with mesh.activate():
        x = torch.ones(3, device=device)
        with pytest.raises(KeyError):
            x.reduce("nope")
        with pytest.raises(ValueError, match="named twice"):
            x.reduce(("gpu", "gpu"))
        with pytest.raises(ValueError, match="one dimension"):
            x.reduce(("host", "gpu"), "stack")
        with pytest.raises(ValueError, match="one dimension"):
            x.reduce((), "sum", scatter=True)
        with pytest.raises(ValueError, match="leading size"):
            x.reduce("gpu", "sum", scatter=True)
        with pytest.raises(ValueError, match="unknown reduction"):
            x.reduce("gpu", "mean")
        with pytest.raises(ValueError, match="in place"):
            x.reduce_("gpu", "stack")
        with pytest.raises(ValueError, match="out="):
            x.reduce("gpu", out=torch.zeros(4, device=device))


def test_recover_from_failure_search(spawn, device):
    """The seed's "double N until it fails" loop, with a per-worker memory cap.

    The cap counts CPU tensor memory (ExecutorOptions.memoryCapBytes): the
    seed's device="cuda" runs here where the workers place it on the CPU (no
    GPU, or device "cpu"); on a GPU the batch stays on the CPU, since a CUDA
    batch would double until the GPU itself ran out (past 64 GiB)."""
    where = device if placed_on(device) == "cpu" else "cpu"
    mesh = spawn({"gpu": 2}, memory_cap=64 << 20)
    N = 1
    failure = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            try:
                with mesh.activate():
                    batch = torch.rand(N, 1024 * 1024, device=where)
                monarch.inspect(batch.sum())
                N = 2 * N
            except Exception as e:  # noqa: BLE001 - the seed catches everything
                failure = e
                break
    # 4 MiB per row: 16 rows hit the 64 MiB cap
    assert N == 16
    assert isinstance(failure, monarch.RemoteException)
    text = str(failure)
    assert "memory cap" in text
    assert "rank" in text
    assert "test_eager.py" in text  # the line that issued torch.rand
    assert failure.location.endswith(f"{__file__}:{_rand_line()}") or "test_eager.py" in failure.location
    # the workers are alive: independent work still runs (on the device)
    with mesh.activate():
        ok = torch.ones(2, device=device) * 3
    assert torch.equal(on(fetch_shard(ok, gpu=1), device), torch.full((2,), 3.0))


def _rand_line() -> int:
    import inspect as pyinspect

    src, start = pyinspect.getsourcelines(test_recover_from_failure_search)
    for i, line in enumerate(src):
        if "torch.rand(N" in line:
            return start + i
    return -1


def test_shape_errors_raise_at_call_site(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        a = torch.ones(2, 3, device=device)
        b = torch.ones(4, 5, device=device)
        before = mesh._session.issued
        with pytest.raises(RuntimeError, match="cannot be multiplied|same reduction dim"):
            a @ b
        # checked on fake tensors: nothing was sent
        assert mesh._session.issued == before


def test_worker_failure_raises_at_get(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        # On the CPU (the bounds check of index_select): on CUDA an index out
        # of range is a device-side assert, which leaves the worker's CUDA
        # context unusable. test_worker_failure_on_the_device_raises_at_get
        # fails on the device instead.
        idx = torch.full((1,), 7, dtype=torch.int64)
        src = torch.arange(4.0)
        # index 7 out of range for size 4: only the worker can see it
        bad = torch.index_select(src, 0, idx)
        dep = bad * 2
        fine = src + 1
    with pytest.raises(monarch.RemoteException) as info:
        monarch.inspect(dep, gpu=1)
    assert info.value.rank == 1
    assert "index" in str(info.value).lower()
    assert "test_eager.py" in info.value.location
    assert torch.equal(monarch.inspect(fine, gpu=1), torch.arange(1.0, 5.0))


def test_a_moved_error_names_its_root_failure(spawn, device):
    """A failure on one stage reaches the next through to_mesh as an error
    whose message is the root's own (only its id crosses processes)."""
    mesh = spawn({"host": 2, "gpu": 1})
    a, b = mesh.slice(host=0), mesh.slice(host=1)
    with a.activate():
        src = torch.arange(4.0, device=device)
        huge = torch.empty(1 << 48, device=device)  # only the worker sees it fail
        bad = huge[:4] + src
    moved = bad.to_mesh(b)
    with pytest.raises(monarch.RemoteException) as root:
        monarch.inspect(bad)  # the root's own report has reached the controller
    with b.activate():
        dep = moved * 2
    with pytest.raises(monarch.RemoteException) as info:
        monarch.inspect(dep)
    text = str(info.value)
    # (the simulation moves the error itself; workers say where it came from)
    assert root.value.worker_message in text and "test_eager.py" in text, text


def test_worker_failure_on_the_device_raises_at_get(spawn, device):
    # An error only the worker sees, raised on the host side of the device's
    # allocator (no CUDA error state is left behind): 1 PiB of float32.
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        src = torch.arange(4.0, device=device)
        huge = torch.empty(1 << 48, device=device)
        dep = huge[:4] + src
        fine = src + 1
    with pytest.raises(monarch.RemoteException) as info:
        monarch.inspect(dep, gpu=1)
    assert info.value.rank == 1
    assert "memory" in str(info.value).lower()
    assert "test_eager.py" in info.value.location
    assert torch.equal(on(fetch_shard(fine, gpu=1), device), torch.arange(1.0, 5.0))
    # the worker is alive and its device still works
    with mesh.activate():
        again = src * 2
    assert torch.equal(on(fetch_shard(again, gpu=0), device), torch.arange(0.0, 8.0, 2.0))


def test_pipeline_matches_local(spawn, device):
    remote_mesh = spawn({"host": 2, "gpu": 2})
    pipeline_mesh = remote_mesh.rename(host="pp")
    meshes = [pipeline_mesh.slice(pp=i) for i in range(pipeline_mesh.size("pp"))]
    layers_per_stage = 2
    stages = []
    for stage_mesh in meshes:
        with stage_mesh.activate():
            layers = []
            for _ in range(layers_per_stage):
                layers.extend([nn.Linear(4, 4, device=device), nn.ReLU()])
            stages.append(nn.Sequential(*layers))

    with meshes[0].activate():
        inp = torch.rand(3, 4, device=device)
    out = programs.forward_pipeline(meshes, stages, inp)
    assert out.mesh.sizes == {"gpu": 2}
    # the activations crossed meshes (to_mesh) and stayed on the device
    for g in range(2):
        on(fetch_shard(out, gpu=g), device)
        on(fetch_shard(stages[1][0].weight, gpu=g), device)
    for g in range(2):
        # the same stages, run locally with the weights of this gpu column
        local_stages = []
        for stage in stages:
            loc = nn.Sequential(*[nn.Linear(4, 4) if isinstance(m, nn.Linear) else nn.ReLU()
                                  for m in stage])
            with torch.no_grad():
                for lp, rp in zip(loc.parameters(), stage.parameters()):
                    lp.copy_(monarch.inspect(rp, gpu=g))
            local_stages.append(loc)
        x = monarch.inspect(inp, gpu=g)
        with torch.no_grad():
            for s in local_stages:
                x = s(x)
        assert torch.allclose(monarch.inspect(out, gpu=g), x, atol=1e-6)


def _ddp_data():
    X = torch.arange(32.0).reshape(8, 4) / 32
    Y = torch.arange(24.0).reshape(8, 3) / 24
    W0 = torch.arange(12.0).reshape(4, 3) / 12 - 0.5
    return X, Y, W0


def _ddp_local(steps, lr):
    X, Y, W0 = _ddp_data()
    w = W0.clone().requires_grad_()
    for _ in range(steps):
        loss = ((X @ w - Y) ** 2).mean()
        (g,) = torch.autograd.grad(loss, [w])
        with torch.no_grad():
            w -= lr * g
    return w.detach()


def _ddp_mesh_program(mesh, steps, lr, device, comms=None):
    dp = mesh.flatten("dp")
    with dp.activate():
        r = dp.rank("dp")
        x = (torch.arange(8.0, device=device).reshape(2, 4) + r * 8) / 32
        y = (torch.arange(6.0, device=device).reshape(2, 3) + r * 6) / 24
        w = (torch.arange(12.0, device=device).reshape(4, 3) / 12 - 0.5).requires_grad_()
        for _ in range(steps):
            loss = ((x @ w - y) ** 2).mean()
            for g in monarch.grad_generator(loss, [w]):
                if comms is None:
                    g.reduce_("dp", "avg")
                else:
                    g_c, borrow = comms.borrow(g, mutable=True)
                    with comms.activate():
                        g_c.reduce_("dp", "avg")
                    borrow.drop()
                with torch.no_grad():
                    w -= lr * g
    return w


def test_ddp_grad_generator_matches_single_process(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    w = _ddp_mesh_program(mesh, steps=3, lr=0.5, device=device)
    expect = _ddp_local(3, 0.5)
    for rank in range(4):
        assert torch.allclose(on(fetch_shard(w, dp=rank), device), expect, atol=1e-6)


def test_ddp_comms_stream_matches_single_process(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    comms = monarch.Stream("comms")
    w = _ddp_mesh_program(mesh, steps=3, lr=0.5, device=device, comms=comms)
    expect = _ddp_local(3, 0.5)
    for rank in range(4):
        assert torch.allclose(on(fetch_shard(w, dp=rank), device), expect, atol=1e-6)


def test_ddp_module_backward(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        lin = nn.Linear(4, 2, device=device)
        x = torch.ones(3, 4, device=device) * (mesh.rank("gpu") + 1)
        lin(x).sum().backward()
        for p in lin.parameters():
            p.grad.reduce_("gpu", "sum")
    # d/dW sum(xW^T + b) = column sums of x: 3*(1) + 3*(2) on the two ranks
    assert torch.allclose(monarch.inspect(lin.weight.grad, gpu=1), torch.full((2, 4), 9.0))
    assert torch.allclose(monarch.inspect(lin.bias.grad), torch.full((2,), 6.0))
    on(fetch_shard(lin.weight.grad, gpu=0), device)


def test_streams_and_borrows(spawn, device):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    assert monarch.get_active_stream().name == "main"
    with comms.activate():
        assert monarch.get_active_stream() is comms
    with mesh.activate():
        t = torch.ones(4, device=device) * (mesh.rank("gpu") + 1)
    t_c, borrow = comms.borrow(t, mutable=False)
    with comms.activate(), mesh.activate():
        s = t_c.reduce("gpu", "sum")
    with borrow:
        pass
    assert borrow.dropped
    with mesh.activate():
        t.add_(1)  # the origin is writable again
    assert torch.equal(on(fetch_shard(s), device), torch.full((4,), 3.0))
    assert torch.equal(on(fetch_shard(t, gpu=1), device), torch.full((4,), 3.0))
    assert s.stream is comms


def test_to_mesh_copies(spawn, device):
    mesh = spawn({"host": 2, "gpu": 2})
    a = mesh.slice(host=0)
    b = mesh.slice(host=1)
    with a.activate():
        t = torch.arange(3.0, device=device) + mesh.slice(host=0).rank("gpu")
    moved = t.to_mesh(b)
    with a.activate():
        t.add_(100)
    assert torch.equal(on(fetch_shard(moved, gpu=1), device), torch.arange(3.0) + 1)
    # broadcast over a dim the source lacks
    everywhere = t.to_mesh(mesh)
    assert torch.equal(on(fetch_shard(everywhere, host=1, gpu=1), device),
                       torch.arange(3.0) + 101)
    # a slice of the tensor's mesh
    with mesh.activate():
        full = torch.ones(2, device=device) * (mesh.rank("host") + 1)
    part = full.slice_mesh(host=1).to_mesh(a)
    assert torch.equal(on(fetch_shard(part, gpu=0), device), torch.full((2,), 2.0))
    with pytest.raises(ValueError, match="incompatible"):
        t.to_mesh(mesh.flatten("all"))


def test_a_rank_whose_first_cuda_tensor_is_received_orders_its_sends(spawn, device):
    """Rank 1 names no cuda device: its first CUDA tensors arrive from rank 0
    (on the comms stream, borrowed from and back to the main stream). It then
    computes a long chain on them and sends the result back: the send must
    wait for the chain's kernels. Its stream used to connect the transfer's
    communicator before it had a CUDA stream, so every later transfer copied
    on the legacy default stream and, now and then, sent memory the last
    kernel had not written yet (the pipeline job on one H200)."""
    mesh = spawn({"host": 2})
    a, b = mesh.slice(host=0), mesh.slice(host=1)
    n, steps = (2048, 24) if device == "cuda" else (64, 2)
    comms = monarch.Stream("comms")
    main = monarch.get_active_stream()

    def send(t, to):
        t_c, borrow = comms.borrow(t, mutable=False)
        with comms.activate():
            moved = t_c.to_mesh(to)
        with borrow:
            pass
        return moved

    with a.activate():
        x = torch.full((n, n), 1.0 / n, device=device)
        y = torch.full((n, 8), 1.0 / n, device=device)
    x_b, y_b = send(x, b), send(y, b)
    for attempt in range(3):
        x_main, bx = main.borrow(x_b, mutable=False)
        y_main, by = main.borrow(y_b, mutable=False)
        with b.activate():
            w = y_main
            for _ in range(steps):
                w = x_main @ w  # stays 1/n: n is a power of two
            z = w + float(attempt + 1)
        with bx, by:
            pass
        back = send(z, a)
        got = on(fetch_shard(back), device)
        assert torch.equal(got, torch.full((n, 8), 1.0 / n + attempt + 1)), (
            f"attempt {attempt}: {got.flatten()[:4].tolist()}")


def test_cuda_on_cpu_keeps_the_device_asked_for():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")

    def prog():
        from monarch.actor import this_host

        mesh = this_host().spawn_procs({"gpu": 2})
        with mesh.activate():
            a = torch.ones(2).cuda()
            b = torch.zeros(2, device="cuda")
            c = torch.ones(2).to(device="cuda")
            return a + b + c

    text = monarch.trace(prog).to_mlir()
    assert text.count('#monarch.device<"cuda">') == 3
    assert text.count('"aten::_to_copy"') == 2


def test_tensors_live_on_the_device_asked_for(spawn, device):
    """Placement, as the workers report it (FetchReply.source_device): what
    is made or moved on ``device`` lives there, on the GPU where there is
    one, and what is naturally on the CPU stays there."""
    mesh = spawn({"host": 2, "gpu": 2})
    first, second = mesh.slice(host=0), mesh.slice(host=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with first.activate():
            made = torch.rand(3, 4, device=device)                # a factory
            computed = made @ made.T + 1                          # results of ops
            lin = nn.Linear(4, 2).to(device)                      # a moved module
            out = lin(made)
            copied = torch.ones(3).to(device)                     # an explicit copy
            on_cpu = torch.ones(3)                                # no device asked for
            rank = first.rank("gpu")                              # 0-d, on the CPU
        with torch.no_grad():
            summed = made.reduce("gpu", "sum")                    # a reduce result
            moved = made.to_mesh(second)                          # a to_mesh copy
    placed = {}
    for name, t, g in [("made", made, 1), ("computed", computed, 0), ("weight", lin.weight, 1),
                       ("bias", lin.bias, 0), ("out", out, 1), ("copied", copied, 0),
                       ("summed", summed, 1), ("moved", moved, 1)]:
        fut = fetch_shard(t, gpu=g)
        value = fut.get()
        assert value.device.type == "cpu", name
        placed[name] = fut.source_device
    assert all(d.startswith(placed_on(device)) for d in placed.values()), placed
    for t in (on_cpu, rank):
        fut = fetch_shard(t, gpu=1)
        fut.get()
        assert fut.source_device == "cpu", fut.source_device
    # the values are right wherever they were computed
    m0, m1 = monarch.inspect(made, gpu=0), monarch.inspect(made, gpu=1)
    assert torch.allclose(monarch.inspect(summed, gpu=0), m0 + m1)
    assert torch.equal(monarch.inspect(moved, gpu=1), m1)


def test_device_mix_is_refused_on_every_machine(spawn):
    """torch's rule -- the tensors of an op share a device type, CPU 0-d
    tensors excepted -- holds with or without a GPU: the frontend tracks the
    device asked for, so a module left on the CPU applied to a CUDA batch
    fails at the call, before anything is sent, also where the workers put
    "cuda" on the CPU. Moving the module fixes it."""
    mesh = spawn({"gpu": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            lin = nn.Linear(4, 4)
            x = torch.rand(3, 4, device="cuda")
            with pytest.raises(RuntimeError, match="expected all tensors to be on the same device"):
                lin(x)
            c = torch.ones(3, 4)
            before = mesh._session.issued
            with pytest.raises(RuntimeError, match="expected all tensors to be on the same device"):
                x + c
            assert mesh._session.issued == before  # nothing was sent
            y = x * torch.tensor(2.0) + 1  # CPU 0-d tensors and numbers are constants
            lin.to("cuda")
            out = lin(x)
    fut = fetch_shard(out, gpu=1)
    got = fut.get()
    assert fut.source_device.startswith(placed_on("cuda"))
    w, b = monarch.inspect(lin.weight, gpu=1), monarch.inspect(lin.bias, gpu=1)
    xs = monarch.inspect(x, gpu=1)
    # cuBLAS and the CPU sum in another order: a relative 1e-4 on CUDA
    assert torch.allclose(got, xs @ w.T + b, rtol=1e-4, atol=1e-6)
    assert torch.allclose(monarch.inspect(y, gpu=1), xs * 2 + 1)


def test_dead_worker_is_a_supervision_error(backend, device):
    if backend != "c":
        pytest.skip("needs worker processes")
    import os
    import signal
    import time

    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 2}, backend="c")
    try:
        with mesh.activate():
            t = torch.ones(2, device=device)
        assert torch.equal(on(fetch_shard(t, gpu=1), device), torch.ones(2))
        os.kill(mesh._session._backend.pids()[1], signal.SIGKILL)
        deadline = time.monotonic() + 10  # noticed within ms; generous under load
        with pytest.raises(monarch.SupervisionError) as info:
            while time.monotonic() < deadline:
                with mesh.activate():
                    u = t + 1
                monarch.inspect(u, gpu=0)
        assert "rank 1" in str(info.value)
    finally:
        mesh.stop()


def test_a_stopped_mesh_fails_at_once(backend, device):
    """After mesh.stop(), an op and a fetch raise at once (issue 23: they
    waited the whole timeout for workers that were gone)."""
    import time

    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 2}, backend=backend)
    with mesh.activate():
        t = torch.ones(2, device=device)
    mesh.stop()
    start = time.monotonic()
    with pytest.raises(monarch.SupervisionError, match="mesh is stopped"):
        with mesh.activate():
            u = t + 1
        monarch.inspect(u, gpu=0)
    assert time.monotonic() - start < 5


def test_indexing_constants_and_views(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        # constants are made on the CPU and copied to the device explicitly
        c = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).to(device) * (mesh.rank("gpu") + 1)
        idx = torch.tensor([1, 0]).to(device)
        rows = c[idx]
        col = c[:, 1]
        v = c.view(4)
        v.mul_(10)  # through a view: c changes too
        cat = torch.cat([c, rows], dim=0)
        parts = torch.split(cat, 2)
    assert torch.equal(monarch.inspect(rows, gpu=1), torch.tensor([[6.0, 8.0], [2.0, 4.0]]))
    assert torch.equal(monarch.inspect(col), torch.tensor([20.0, 40.0]))  # a view of c
    assert torch.equal(monarch.inspect(c, gpu=1), torch.tensor([[20.0, 40.0], [60.0, 80.0]]))
    assert len(parts) == 2 and parts[1].shape == (2, 2)
    assert torch.equal(monarch.inspect(parts[1], gpu=1), torch.tensor([[6.0, 8.0], [2.0, 4.0]]))
    for x in (c, rows, col, cat, parts[0]):
        on(fetch_shard(x, gpu=1), device)


def test_dtype_promotion_matches_torch(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        r = mesh.rank("gpu")               # int64, 0-d, on the CPU
        a = r * 0.5                         # float32, as in torch
        b = torch.ones(2, dtype=torch.float64, device=device) + 0.1
        c = torch.ones(2, dtype=torch.int32, device=device) + 1
        d = torch.ones(2, dtype=torch.bool, device=device) + 1
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (
        torch.float32, torch.float64, torch.int32, torch.int64)
    assert monarch.inspect(a, gpu=1).dtype == torch.float32
    assert monarch.inspect(a, gpu=1).item() == 0.5
    assert torch.equal(monarch.inspect(b), torch.full((2,), 1.1, dtype=torch.float64))
    assert monarch.inspect(c).dtype == torch.int32
    assert torch.equal(monarch.inspect(d), torch.full((2,), 2))
    assert on(fetch_shard(a, gpu=1), "cpu").item() == 0.5  # the rank's math stays on the CPU
    for x in (b, c, d):
        on(fetch_shard(x), device)


def test_grad_generator_is_incremental(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        model = nn.Sequential(nn.Linear(4, 4, device=device), nn.ReLU(),
                              nn.Linear(4, 2, device=device))
        x = torch.ones(3, 4, device=device)
        params = list(model.parameters())
        loss = model(x).sum()
        seen = []
        for g in monarch.grad_generator(loss, list(reversed(params))):
            seen.append((g._ref.id, mesh._session._next_ref))
            g.reduce_("gpu", "sum")
        # the first gradient came back before the backward made the last one
        assert seen[0][1] <= seen[-1][0]
        # forward order and a plain backward give the same gradients
        loss2 = model(x).sum()
        fwd = list(monarch.grad_generator(loss2, params))
        loss3 = model(x).sum()
        loss3.backward()
    for p, g in zip(params, fwd):
        assert torch.allclose(monarch.inspect(g, gpu=1), monarch.inspect(p.grad, gpu=1))


def test_grad_generator_early_exit_and_unused(spawn, device):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(3, requires_grad=True, device=device)
        unused = torch.ones(3, requires_grad=True, device=device)
        shared = torch.ones(3, requires_grad=True, device=device)
        loss = (w * shared * shared).sum()
        gen = monarch.grad_generator(loss, [w, unused, shared])
        gw = next(gen)
        gen.close()  # stopping early leaves nothing running
        loss = (w * shared * shared).sum()
        gw, gu, gs = monarch.grad_generator(loss, [w, unused, shared])
    assert gu is None
    assert torch.equal(monarch.inspect(gw), torch.ones(3))
    assert torch.equal(monarch.inspect(gs), torch.full((3,), 2.0))


def _grad_generator_threads_end(timeout: float = 30.0) -> bool:
    for t in threading.enumerate():
        if t.name == "monarch-grad-generator":
            t.join(timeout)
            if t.is_alive():
                return False
    return True


def test_grad_generator_never_leaves_a_backward_paused(spawn, device):
    # With CUDA tensors torch runs backward hooks on autograd's shared device
    # thread: a backward left paused behind a generator nobody advances hangs
    # every later backward on that device (Monarch's distributed_tensors.py
    # did, its zip(params, grads) never asking for the end).
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        model = nn.Sequential(nn.Linear(4, 4, device=device), nn.ReLU(),
                              nn.Linear(4, 2, device=device))
        x = torch.ones(3, 4, device=device)
        rparams = list(reversed(list(model.parameters())))
        for p, g in zip(rparams, monarch.grad_generator(model(x).sum(), rparams)):
            g.reduce_("gpu", "sum")
        assert _grad_generator_threads_end()  # all handed out: the backward ended
        gen = monarch.grad_generator(model(x).sum(), rparams)
        next(gen)
        del gen  # dropped early, never closed
        assert _grad_generator_threads_end()
        # and later backwards still run
        grads = list(monarch.grad_generator(model(x).sum(), rparams))
    assert torch.equal(monarch.inspect(grads[0]), torch.full((2,), 3.0))


def test_module_conversions_and_data(spawn, device):
    mesh = spawn({"gpu": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            model = nn.Linear(4, 2).double()
            # Module.cuda() for CUDA (Module.to(device) is in
            # test_tensors_live_on_the_device_asked_for)
            model = model.cuda() if device == "cuda" else model.cpu()
            assert model.weight.dtype == torch.float64
            assert isinstance(model.weight, nn.Parameter) and model.weight.requires_grad
            with torch.no_grad():
                model.weight.data.fill_(0.5)  # .data aliases the parameter
                model.bias.zero_()
            y = model(torch.ones(3, 4, dtype=torch.float64, device=device))
    assert torch.equal(on(fetch_shard(y, gpu=1), device),
                       torch.full((3, 2), 2.0, dtype=torch.float64))
    assert on(fetch_shard(model.weight), device).dtype == torch.float64


def test_metadata_queries_are_answered_locally(spawn, device):
    # autograd calls aten::is_same_size (a Python bool) on the distributed
    # tensors; such metadata-only ops are answered from the fake tensors on
    # the controller and send nothing to the workers.
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(3, device=device).requires_grad_(True)
        (g,) = torch.autograd.grad(w * 2, [w], grad_outputs=torch.ones(3, device=device))
        a, b = torch.ones(2, 3, device=device), torch.ones(3, 2, device=device)
        bt = b.t()
        session = mesh._session
        before = (session.issued, session._next_ref)
        assert torch.ops.aten.is_same_size(a, a) is True
        assert torch.ops.aten.is_same_size(a, b) is False
        assert torch.ops.aten.dim(a) == 2 and torch.ops.aten.numel(b) == 6
        assert torch.ops.aten.is_contiguous(bt) is False
        assert torch.ops.aten.sym_size(b, 1) == 2
        assert (session.issued, session._next_ref) == before
    assert torch.equal(on(fetch_shard(g), device), torch.full((3,), 2.0))


def _layer_norm_grads(device="cpu"):
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(4, device=device)
    x = torch.arange(8.0, device=device).reshape(2, 4)
    gw, gb = torch.autograd.grad((ln(x) * x).sum(), [ln.weight, ln.bias])
    return gw, gb


def test_undefined_tensor_results_keep_their_place(spawn, device):
    # native_layer_norm_backward with output_mask [False, True, True] leaves
    # grad_input undefined: the workers still bind grad_weight and grad_bias
    # to the right refs (before the fix, every result shifted by one).
    want_w, want_b = _layer_norm_grads()
    mesh = spawn({"gpu": 1})
    with mesh.activate():
        gw, gb = _layer_norm_grads(device)
        x = torch.arange(8.0, device=device).reshape(2, 4)
        w = torch.full((4,), 1.5, device=device)
        bias = torch.full((4,), 0.5, device=device)
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, [4], w, bias, 1e-5)
        gi, gw2, gb2 = torch.ops.aten.native_layer_norm_backward(
            x / 8, x, [4], mean, rstd, w, bias, [False, True, True]
        )
    assert gi is None
    assert torch.allclose(monarch.inspect(gw), want_w)
    assert torch.allclose(monarch.inspect(gb), want_b)
    lx = torch.arange(8.0).reshape(2, 4)
    lw, lb = torch.full((4,), 1.5), torch.full((4,), 0.5)
    _, lm, lr = torch.ops.aten.native_layer_norm(lx, [4], lw, lb, 1e-5)
    _, ww, wb = torch.ops.aten.native_layer_norm_backward(
        lx / 8, lx, [4], lm, lr, lw, lb, [False, True, True]
    )
    assert torch.allclose(on(fetch_shard(gw2), device), ww)
    assert torch.allclose(on(fetch_shard(gb2), device), wb)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the warning is about "
                    "workers outnumbering this host's GPUs)")
def test_workers_sharing_a_gpu_are_reported_once(tmp_path):
    import subprocess
    import sys

    n = torch.cuda.device_count() + 1
    script = tmp_path / "share.py"
    script.write_text(
        "import torch, monarch\n"
        "from monarch.actor import this_host\n"
        f"for _ in range(2):\n"
        f"    m = this_host().spawn_procs({{'gpu': {n}}})\n"
        "    with m.activate():\n"
        "        t = torch.ones(2, device='cuda')\n"
        "    print(monarch.fetch_shard(t, gpu=1).get().tolist())\n"
        "    m.stop()\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("worker processes share") == 1, out.stderr
    assert out.stdout.count("[1.0, 1.0]") == 2
