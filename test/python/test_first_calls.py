"""First calls of an op signature (dispatch._first_call): the results'
metadata come from the op's meta kernel on plain meta tensors, and from
FakeTensorMode where the meta run cannot answer the same way (no meta
kernel, an error, inputs on two devices). Both ways must give the same
results: shapes, strides, storage offsets, dtypes, devices, and which
results are inputs."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import monarch
from monarch._src.tensor import dispatch
from monarch._src.tensor.core import TensorCore


@pytest.fixture(scope="module")
def mesh():
    from monarch.actor import this_host

    m = this_host().spawn_procs({"gpu": 2}, backend="sim")
    yield m
    m.stop()


def _cases(device):
    """(name, fn): fn() -> the tensors (or tuples of them) to compare; every
    input is made inside, so each run makes its own."""
    def mk(*shape, dtype=torch.float32):
        return torch.ones(*shape, dtype=dtype, device=device)

    def linear_backward():
        torch.manual_seed(0)
        lin = nn.Linear(4, 3, device=device)
        x = mk(2, 4).requires_grad_(True)
        loss = F.log_softmax(lin(x).tanh(), dim=1).sum()
        return torch.autograd.grad(loss, [x, lin.weight, lin.bias])

    def layer_norm():
        ln = nn.LayerNorm(4, device=device)
        x = mk(2, 4).requires_grad_(True)
        (ln(x) * x).sum().backward()
        return x.grad, ln.weight.grad

    def in_place():
        x = mk(3, 4)
        y = x.add_(1)
        z = x[1:].mul_(2)
        return x, y, z, y is x

    def out_variant():
        x, out = mk(3), mk(3)
        r = torch.add(x, x, out=out)
        return r, r is out

    def rank_math():
        r = mesh_rank[0]
        return r * 0.5, mk(2) + r, (mk(2) * r).sum()

    return [
        ("binary", lambda: (mk(3, 4) + mk(4), mk(3, 4) * 2.5, mk(3, 1) - mk(1, 4))),
        ("promotion", lambda: (mk(2, dtype=torch.int32) + 1, mk(2, dtype=torch.bool) + 1,
                               mk(2, dtype=torch.float64) + 0.1, mk(2, dtype=torch.half) * 3.0,
                               mk(2, dtype=torch.int64) / 2)),
        ("reductions", lambda: (mk(3, 4).sum(), mk(3, 4).sum(1, keepdim=True),
                                mk(3, 4).mean(0), mk(3, 4).max(dim=1), mk(3, 4).amax(0),
                                mk(3, 4, dtype=torch.int32).sum())),
        ("views", lambda: (mk(3, 4).t(), mk(3, 4)[1:, ::2], mk(3, 4).view(-1),
                           mk(3, 4).reshape(4, 3), mk(3, 4).unsqueeze(0).expand(2, 3, 4),
                           mk(2, 3, 4).permute(2, 0, 1), mk(3, 4)[1], mk(3, 4)[:, 2:],
                           mk(2, 3, 4).transpose(0, 2).contiguous(), mk(6).as_strided((2, 2), (1, 2), 1))),
        ("shape ops", lambda: (torch.cat([mk(2, 3), mk(1, 3)]), torch.stack([mk(3), mk(3)], 1),
                               mk(4, 3).split(2), mk(4, 3).chunk(3, 1), mk(2, 3).flatten(),
                               mk(2, 3).repeat(2, 1))),
        ("matmul", lambda: (mk(2, 3) @ mk(3, 4), torch.mm(mk(2, 3), mk(3, 5)),
                            torch.addmm(mk(4), mk(2, 3), mk(3, 4)), torch.bmm(mk(2, 2, 3), mk(2, 3, 1)),
                            mk(3) @ mk(3))),
        ("unary", lambda: (mk(3).relu(), torch.tanh(mk(3)), mk(3).sqrt(), mk(3).pow(2),
                           mk(3).clamp(min=0), mk(3).exp(), mk(3, 2).softmax(1), mk(3) > 0,
                           torch.where(mk(3) > 0, mk(3), mk(3)), mk(3).masked_fill(mk(3) > 0, 0.0),
                           mk(3).neg().abs().sign())),
        ("conversions", lambda: (mk(3).to(torch.float64), mk(3).half(), mk(3).int(), mk(3).bool(),
                                 mk(3).clone(), mk(2, 3).t().clone(memory_format=torch.contiguous_format),
                                 mk(3).to(device), mk(3).type_as(mk(1, dtype=torch.int64)))),
        ("factories", lambda: (torch.zeros(3, 4, device=device), torch.ones_like(mk(2, 3)),
                               torch.empty(2, 3, dtype=torch.int64, device=device),
                               torch.arange(0.0, 5.0, device=device), torch.arange(5, device=device),
                               torch.full((2, 2), 7, device=device), torch.randn(3, device=device),
                               mk(2).new_zeros(4), torch.empty_like(mk(2, 3).t()),
                               torch.zeros_like(mk(2), dtype=torch.int32), torch.eye(3, device=device),
                               torch.linspace(0, 1, 5, device=device),
                               torch.randint(0, 10, (3,), device=device))),
        ("indexing", lambda: (mk(4, 3).index_select(0, torch.arange(2, device=device)),
                              mk(4, 3).gather(1, torch.zeros(4, 1, dtype=torch.int64, device=device)),
                              F.embedding(torch.arange(3, device=device), mk(5, 2)))),
        ("losses", lambda: (F.cross_entropy(mk(4, 3), torch.zeros(4, dtype=torch.int64, device=device)),
                            F.mse_loss(mk(4), mk(4)))),
        ("autograd", linear_backward),
        ("layer norm", layer_norm),
        ("in place", in_place),
        ("out=", out_variant),
        ("rank", rank_math),
    ]


mesh_rank: list = []


def _meta(v):
    """What is compared of a result: metadata, the device the workers use,
    and where a result is one of the inputs."""
    if isinstance(v, TensorCore):
        sp = v._spec
        return ("tensor", tuple(v.shape), v.stride(), v.storage_offset(), v.dtype, v.device,
                sp.fake_device, sp.device)
    if isinstance(v, (tuple, list)):
        return tuple(_meta(x) for x in v)
    return v


def _run_cases(mesh, device, monkeypatch, meta: bool):
    monkeypatch.setattr(dispatch, "_cache", {})  # every signature is a first call
    monkeypatch.setattr(dispatch, "learned_fake", set())
    monkeypatch.setattr(dispatch, "META_PROPAGATION", meta)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mesh.activate():
            mesh_rank[:] = [mesh.rank("gpu")]
            for name, fn in _cases(device):
                out[name] = _meta(fn())
    return out


def test_meta_first_calls_agree_with_fake_tensor(mesh, device, monkeypatch):
    fakes = []
    run_fake = dispatch._run_fake

    def counting(func, info, *a):
        fakes.append(info.what)
        return run_fake(func, info, *a)

    monkeypatch.setattr(dispatch, "_run_fake", counting)
    monkeypatch.setattr(dispatch, "CHECK_META", False)  # (MONARCH_CHECK_META=1 runs both)
    by_meta = _run_cases(mesh, device, monkeypatch, meta=True)
    # ops the meta run answers never reach FakeTensorMode (the rank is a lifted
    # constant: torch.tensor inside activate takes FakeTensor's path)
    assert [w for w in fakes if "lift" not in w] == [], fakes
    fakes.clear()
    by_fake = _run_cases(mesh, device, monkeypatch, meta=False)
    assert fakes  # and that run really used FakeTensorMode
    for name in by_fake:
        assert by_meta[name] == by_fake[name], name
    # the same, op by op, as the debugging check compares them
    monkeypatch.setattr(dispatch, "CHECK_META", True)
    assert _run_cases(mesh, device, monkeypatch, meta=True) == by_fake


def _without_meta_kernel():
    """Ops this torch has no meta kernel for (the FakeTensor way runs them
    on zero-filled CPU tensors)."""
    x = torch.empty(3, 4, device="meta")
    found = []
    for name, fn in [("cummax", lambda t: torch.cummax(t, 1)),
                     ("kthvalue", lambda t: torch.kthvalue(t, 2, 1)),
                     ("mode", lambda t: torch.mode(t, 1)),
                     ("histc", lambda t: torch.histc(t, 4)),
                     ("logcumsumexp", lambda t: torch.logcumsumexp(t, 1))]:
        try:
            fn(x)
        except NotImplementedError:
            found.append((name, fn))
        except Exception:
            pass
    return found


def test_an_op_without_a_meta_kernel_falls_back_to_fake_tensor(mesh, device, monkeypatch):
    ops = _without_meta_kernel()
    if not ops:
        pytest.skip("this torch has meta kernels for every candidate op")
    monkeypatch.setattr(dispatch, "_cache", {})
    monkeypatch.setattr(dispatch, "learned_fake", set())
    local = torch.arange(12.0).reshape(3, 4).flip(1)
    with mesh.activate():
        x = torch.arange(12.0, device=device).reshape(3, 4).flip(1)
        got = [(name, fn(x)) for name, fn in ops]
    for name, fn in ops:
        want = fn(local)
        value = dict(got)[name]
        wants = want if isinstance(want, tuple) else (want,)
        values = value if isinstance(value, tuple) else (value,)
        for v, w in zip(values, wants):
            assert (tuple(v.shape), v.dtype, v.stride()) == (tuple(w.shape), w.dtype, w.stride()), name
            assert torch.equal(monarch.inspect(v, gpu=1), w), name
    # the op takes the FakeTensor way from now on (no second failed meta run)
    infos = [dispatch.op_info(f) for f in (torch.ops.aten.cummax.default,
                                           torch.ops.aten.kthvalue.default,
                                           torch.ops.aten.mode.default)]
    names = {name for name, _ in ops}
    for info in infos:
        if info.name.split("::")[1] in names:
            assert info in dispatch.learned_fake, info.what


def test_a_failed_meta_run_gives_the_fake_tensor_answer(mesh, device, monkeypatch):
    want = _run_cases(mesh, device, monkeypatch, meta=False)

    def refuse(*a, **k):
        raise dispatch._NeedFake()

    monkeypatch.setattr(dispatch, "_propagate_meta", refuse)
    assert _run_cases(mesh, device, monkeypatch, meta=True) == want


def test_errors_of_first_calls_are_fake_tensors(mesh, device, monkeypatch, caplog):
    """A shape error fails the meta run; the FakeTensor way then raises the
    error users saw before (without the traceback FakeTensorMode logs), and
    the op keeps the meta way."""
    monkeypatch.setattr(dispatch, "_cache", {})
    monkeypatch.setattr(dispatch, "learned_fake", set())
    with mesh.activate():
        a, b = torch.ones(2, 3, device=device), torch.ones(2, 3, device=device)
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied|"
                                               r"size mismatch|cannot be multiplied|"
                                               r"must have same reduction dim"):
            torch.mm(a, b)
        assert not [r for r in caplog.records if "failed while attempting" in r.getMessage()]
        assert dispatch.op_info(torch.ops.aten.mm.default) not in dispatch.learned_fake
        with pytest.raises(RuntimeError, match="must match the size|"
                                               "Attempting to broadcast a dimension"):
            a + torch.ones(4, device=device)


def test_the_device_rule_of_the_meta_run():
    """FakeTensor's rule for the inputs' common device: one device, CPU 0-d
    tensors deferring to any other; two devices otherwise go the FakeTensor
    way (which raises the device-mix error)."""
    cpu, cuda, cuda1 = torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 1)

    def common(*devs):
        ma = dispatch._MetaArgs()
        for d, zero_dim in devs:
            ma.merge(d, zero_dim)
        return ma.device

    assert common((cpu, False), (cpu, True)) == cpu
    assert common((cpu, True), (cuda, False)) == cuda
    assert common((cuda, False), (cpu, True)) == cuda
    assert common((cpu, True), (cpu, True)) == cpu
    assert common((cuda, True), (cuda, False)) == cuda
    for devs in [((cpu, False), (cuda, False)), ((cuda, False), (cuda1, False)),
                 ((cuda, True), (cpu, False)), ((cpu, True), (cuda, False), (cpu, False))]:
        with pytest.raises(dispatch._NeedFake):
            common(*devs)
