"""Eager execution of the seed programs on CPU (both backends)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn

import monarch
import programs
from monarch import fetch_shard


def test_outside_activate_is_local(spawn):
    mesh = spawn({"gpu": 2})
    local_t = torch.rand(3, 4)
    assert type(local_t) is torch.Tensor
    with mesh.activate():
        t = torch.rand(3, 4)
    assert isinstance(t, monarch.Tensor)
    assert t.shape == (3, 4) and t.dtype == torch.float32
    assert type(torch.ones(2) + 1) is torch.Tensor


def test_activate_rand_matmul_fetch(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            t = torch.rand(3, 4, device="cuda")
            dist_compute = t @ t.T
    shards = {}
    for h in range(2):
        for g in range(2):
            shards[h, g] = fetch_shard(t, host=h, gpu=g).get()
            assert shards[h, g].shape == (3, 4)
            got = fetch_shard(dist_compute, host=h, gpu=g).get()
            assert torch.allclose(got, shards[h, g] @ shards[h, g].T)
    # every rank holds its own copy: random values differ between ranks
    assert not torch.equal(shards[0, 0], shards[0, 1])
    assert torch.equal(monarch.inspect(t), shards[0, 0])
    assert torch.equal(monarch.inspect(t, gpu=1), shards[0, 1])
    assert torch.equal(fetch_shard(t, {"host": 1}, gpu=1).get(), shards[1, 1])


def test_show(spawn, capsys):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        t = torch.full((2,), 7.0) + mesh.rank("gpu")
    monarch.show(t, gpu=1)
    assert "8." in capsys.readouterr().out


def test_fetch_coordinate_errors(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    with mesh.activate():
        t = torch.ones(2)
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


def _values(mesh):
    """x on rank (h, g) = [1, 2, 3, 4] * (10h + g + 1)."""
    with mesh.activate():
        scale = mesh.rank("host") * 10 + mesh.rank("gpu") + 1
        return torch.arange(1.0, 5.0) * scale


def _local(h, g):
    return torch.arange(1.0, 5.0) * (10 * h + g + 1)


@pytest.mark.parametrize("dims", ["gpu", "host", ("host", "gpu"), ()])
@pytest.mark.parametrize("reduction", ["sum", "avg", "min", "max", "product"])
def test_reduce_values(spawn, dims, reduction):
    mesh = spawn({"host": 2, "gpu": 2})
    x = _values(mesh)
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
            assert torch.allclose(monarch.inspect(r, host=h, gpu=g), expect)


def test_reduce_stack_scatter(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    x = _values(mesh)
    with mesh.activate():
        st = x.reduce("gpu", "stack")
        rs = x.reshape(2, 2).reduce("gpu", "sum", scatter=True)
        a2a = x.reshape(2, 2).reduce("host", "stack", scatter=True)
        y = x.clone()
        y.reduce_("host", "max")
        out = torch.zeros(4)
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


def test_reduce_errors(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    with mesh.activate():
        x = torch.ones(3)
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
            x.reduce("gpu", out=torch.zeros(4))


def test_recover_from_failure_search(spawn):
    """The seed's "double N until it fails" loop, with a per-worker memory cap."""
    mesh = spawn({"gpu": 2}, memory_cap=64 << 20)
    N = 1
    failure = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            try:
                with mesh.activate():
                    batch = torch.rand(N, 1024 * 1024, device="cuda")
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
    # the workers are alive: independent work still runs
    with mesh.activate():
        ok = torch.ones(2) * 3
    assert torch.equal(monarch.inspect(ok, gpu=1), torch.full((2,), 3.0))


def _rand_line() -> int:
    import inspect as pyinspect

    src, start = pyinspect.getsourcelines(test_recover_from_failure_search)
    for i, line in enumerate(src):
        if "torch.rand(N" in line:
            return start + i
    return -1


def test_shape_errors_raise_at_call_site(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        a = torch.ones(2, 3)
        b = torch.ones(4, 5)
        before = mesh._session.issued
        with pytest.raises(RuntimeError, match="cannot be multiplied|same reduction dim"):
            a @ b
        # checked on fake tensors: nothing was sent
        assert mesh._session.issued == before


def test_worker_failure_raises_at_get(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
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


def test_pipeline_matches_local(spawn):
    remote_mesh = spawn({"host": 2, "gpu": 2})
    pipeline_mesh = remote_mesh.rename(host="pp")
    meshes = [pipeline_mesh.slice(pp=i) for i in range(pipeline_mesh.size("pp"))]
    layers_per_stage = 2
    stages = []
    for stage_mesh in meshes:
        with stage_mesh.activate():
            layers = []
            for _ in range(layers_per_stage):
                layers.extend([nn.Linear(4, 4), nn.ReLU()])
            stages.append(nn.Sequential(*layers))

    with meshes[0].activate():
        inp = torch.rand(3, 4)
    out = programs.forward_pipeline(meshes, stages, inp)
    assert out.mesh.sizes == {"gpu": 2}
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


def _ddp_mesh_program(mesh, steps, lr, comms=None):
    dp = mesh.flatten("dp")
    with dp.activate():
        r = dp.rank("dp")
        x = (torch.arange(8.0).reshape(2, 4) + r * 8) / 32
        y = (torch.arange(6.0).reshape(2, 3) + r * 6) / 24
        w = (torch.arange(12.0).reshape(4, 3) / 12 - 0.5).requires_grad_()
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


def test_ddp_grad_generator_matches_single_process(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    w = _ddp_mesh_program(mesh, steps=3, lr=0.5)
    expect = _ddp_local(3, 0.5)
    for rank in range(4):
        assert torch.allclose(monarch.inspect(w, dp=rank), expect, atol=1e-6)


def test_ddp_comms_stream_matches_single_process(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    comms = monarch.Stream("comms")
    w = _ddp_mesh_program(mesh, steps=3, lr=0.5, comms=comms)
    expect = _ddp_local(3, 0.5)
    for rank in range(4):
        assert torch.allclose(monarch.inspect(w, dp=rank), expect, atol=1e-6)


def test_ddp_module_backward(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        lin = nn.Linear(4, 2)
        x = torch.ones(3, 4) * (mesh.rank("gpu") + 1)
        lin(x).sum().backward()
        for p in lin.parameters():
            p.grad.reduce_("gpu", "sum")
    # d/dW sum(xW^T + b) = column sums of x: 3*(1) + 3*(2) on the two ranks
    assert torch.allclose(monarch.inspect(lin.weight.grad, gpu=1), torch.full((2, 4), 9.0))
    assert torch.allclose(monarch.inspect(lin.bias.grad), torch.full((2,), 6.0))


def test_streams_and_borrows(spawn):
    mesh = spawn({"gpu": 2})
    comms = monarch.Stream("comms")
    assert monarch.get_active_stream().name == "main"
    with comms.activate():
        assert monarch.get_active_stream() is comms
    with mesh.activate():
        t = torch.ones(4) * (mesh.rank("gpu") + 1)
    t_c, borrow = comms.borrow(t, mutable=False)
    with comms.activate(), mesh.activate():
        s = t_c.reduce("gpu", "sum")
    with borrow:
        pass
    assert borrow.dropped
    with mesh.activate():
        t.add_(1)  # the origin is writable again
    assert torch.equal(monarch.inspect(s), torch.full((4,), 3.0))
    assert torch.equal(monarch.inspect(t, gpu=1), torch.full((4,), 3.0))
    assert s.stream is comms


def test_to_mesh_copies(spawn):
    mesh = spawn({"host": 2, "gpu": 2})
    a = mesh.slice(host=0)
    b = mesh.slice(host=1)
    with a.activate():
        t = torch.arange(3.0) + mesh.slice(host=0).rank("gpu")
    moved = t.to_mesh(b)
    with a.activate():
        t.add_(100)
    assert torch.equal(monarch.inspect(moved, gpu=1), torch.arange(3.0) + 1)
    # broadcast over a dim the source lacks
    everywhere = t.to_mesh(mesh)
    assert torch.equal(monarch.inspect(everywhere, host=1, gpu=1), torch.arange(3.0) + 101)
    # a slice of the tensor's mesh
    with mesh.activate():
        full = torch.ones(2) * (mesh.rank("host") + 1)
    part = full.slice_mesh(host=1).to_mesh(a)
    assert torch.equal(monarch.inspect(part, gpu=0), torch.full((2,), 2.0))
    with pytest.raises(ValueError, match="incompatible"):
        t.to_mesh(mesh.flatten("all"))


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


def test_dead_worker_is_a_supervision_error(backend):
    if backend != "c":
        pytest.skip("needs worker processes")
    import os
    import signal
    import time

    from monarch.actor import this_host

    mesh = this_host().spawn_procs({"gpu": 2}, backend="c")
    try:
        with mesh.activate():
            t = torch.ones(2)
        assert torch.equal(monarch.inspect(t, gpu=1), torch.ones(2))
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


def test_indexing_constants_and_views(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        c = torch.tensor([[1.0, 2.0], [3.0, 4.0]]) * (mesh.rank("gpu") + 1)
        idx = torch.tensor([1, 0])
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


def test_dtype_promotion_matches_torch(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        r = mesh.rank("gpu")               # int64
        a = r * 0.5                         # float32, as in torch
        b = torch.ones(2, dtype=torch.float64) + 0.1
        c = torch.ones(2, dtype=torch.int32) + 1
        d = torch.ones(2, dtype=torch.bool) + 1
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (
        torch.float32, torch.float64, torch.int32, torch.int64)
    assert monarch.inspect(a, gpu=1).dtype == torch.float32
    assert monarch.inspect(a, gpu=1).item() == 0.5
    assert torch.equal(monarch.inspect(b), torch.full((2,), 1.1, dtype=torch.float64))
    assert monarch.inspect(c).dtype == torch.int32
    assert torch.equal(monarch.inspect(d), torch.full((2,), 2))


def test_grad_generator_is_incremental(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        x = torch.ones(3, 4)
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


def test_grad_generator_early_exit_and_unused(spawn):
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(3, requires_grad=True)
        unused = torch.ones(3, requires_grad=True)
        shared = torch.ones(3, requires_grad=True)
        loss = (w * shared * shared).sum()
        gen = monarch.grad_generator(loss, [w, unused, shared])
        gw = next(gen)
        gen.close()  # stopping early leaves nothing running
        loss = (w * shared * shared).sum()
        gw, gu, gs = monarch.grad_generator(loss, [w, unused, shared])
    assert gu is None
    assert torch.equal(monarch.inspect(gw), torch.ones(3))
    assert torch.equal(monarch.inspect(gs), torch.full((3,), 2.0))


def test_module_conversions_and_data(spawn):
    mesh = spawn({"gpu": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            model = nn.Linear(4, 2).double().cuda()
            assert model.weight.dtype == torch.float64
            assert isinstance(model.weight, nn.Parameter) and model.weight.requires_grad
            with torch.no_grad():
                model.weight.data.fill_(0.5)  # .data aliases the parameter
                model.bias.zero_()
            y = model(torch.ones(3, 4, dtype=torch.float64, device="cuda"))
    assert torch.equal(monarch.inspect(y, gpu=1), torch.full((3, 2), 2.0, dtype=torch.float64))


def test_metadata_queries_are_answered_locally(spawn):
    # autograd calls aten::is_same_size (a Python bool) on the distributed
    # tensors; such metadata-only ops are answered from the fake tensors on
    # the controller and send nothing to the workers.
    mesh = spawn({"gpu": 2})
    with mesh.activate():
        w = torch.ones(3).requires_grad_(True)
        (g,) = torch.autograd.grad(w * 2, [w], grad_outputs=torch.ones(3))
        a, b = torch.ones(2, 3), torch.ones(3, 2)
        bt = b.t()
        session = mesh._session
        before = (session.issued, session._next_ref)
        assert torch.ops.aten.is_same_size(a, a) is True
        assert torch.ops.aten.is_same_size(a, b) is False
        assert torch.ops.aten.dim(a) == 2 and torch.ops.aten.numel(b) == 6
        assert torch.ops.aten.is_contiguous(bt) is False
        assert torch.ops.aten.sym_size(b, 1) == 2
        assert (session.issued, session._next_ref) == before
    assert torch.equal(monarch.inspect(g), torch.full((3,), 2.0))


def _layer_norm_grads():
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(4)
    x = torch.arange(8.0).reshape(2, 4)
    gw, gb = torch.autograd.grad((ln(x) * x).sum(), [ln.weight, ln.bias])
    return gw, gb


def test_undefined_tensor_results_keep_their_place(spawn):
    # native_layer_norm_backward with output_mask [False, True, True] leaves
    # grad_input undefined: the workers still bind grad_weight and grad_bias
    # to the right refs (before the fix, every result shifted by one).
    want_w, want_b = _layer_norm_grads()
    mesh = spawn({"gpu": 1})
    with mesh.activate():
        gw, gb = _layer_norm_grads()
        x = torch.arange(8.0).reshape(2, 4)
        w, bias = torch.full((4,), 1.5), torch.full((4,), 0.5)
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
    assert torch.allclose(monarch.inspect(gw2), ww)
    assert torch.allclose(monarch.inspect(gb2), wb)
