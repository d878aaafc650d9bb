"""monarch.rdma between Python actors and the controller (docs/rdma.md).

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest test/python/test_rdma.py

One Python actor owns registered tensors; the controller reads and writes
them over the TCP fallback (no RDMA NIC here), and the other way round.

test_buffers_over_device_memory runs on the test device: CUDA memory (through
host copies, docs/rdma.md "CUDA memory") where the machine has a GPU, else
the actor's tensor falls back to the CPU. The other tests register CPU
memory by nature.
"""

from __future__ import annotations

import pytest

_rdma = pytest.importorskip("monarch._rdma")

import torch  # noqa: E402

from monarch.actor import Actor, endpoint, this_host  # noqa: E402
from monarch.rdma import RDMABuffer, RDMAError, backend, submit  # noqa: E402


def _actor_device(device: str) -> str:
    """Where an actor allocates tensors asked for on ``device``: decided in
    its own process, the CPU where it has no GPU."""
    return device if torch.cuda.is_available() else "cpu"


class Owner(Actor):
    def __init__(self):
        self.tensors = {}
        self.buffers = {}

    @endpoint
    def make(self, name: str, n: int, start: float) -> RDMABuffer:
        t = torch.arange(n, dtype=torch.float32) + start
        self.tensors[name] = t
        self.buffers[name] = RDMABuffer(t)
        return self.buffers[name]

    @endpoint
    def make_on(self, name: str, n: int, device: str):
        """A tensor on ``device`` (where this process has a GPU) and a buffer
        over it: (the tensor's device, the buffer or None, the refusal)."""
        t = torch.arange(n, dtype=torch.float32, device=_actor_device(device))
        try:
            buf = RDMABuffer(t)
        except RDMAError as e:
            return str(t.device), None, (e.code, str(e))
        self.tensors[name] = t
        self.buffers[name] = buf
        return str(t.device), buf, None

    @endpoint
    def tensor(self, name: str) -> torch.Tensor:
        return self.tensors[name].clone()

    @endpoint
    def drop(self, name: str) -> None:
        self.buffers[name].drop()

    @endpoint
    def fetch(self, buf: RDMABuffer, n: int, offset: int) -> bytes:
        """Reads another proc's buffer from inside an actor."""
        dst = bytearray(n)
        buf.read_into(dst, offset=offset).get(30)
        return bytes(dst)

    @endpoint
    def backend(self) -> str:
        return backend()


@pytest.fixture(scope="module")
def owner():
    mesh = this_host().spawn_procs({"gpu": 1}, backend="sim")
    yield mesh.spawn("owner", Owner)
    mesh.stop()


def test_backend_is_the_tcp_fallback(owner):
    assert backend() == "tcp"
    assert owner.backend.call_one().get(30) == "tcp"
    # Monarch's names for the same facts.
    from monarch.rdma import get_rdma_backend, is_ibverbs_available, is_rdma_available

    assert get_rdma_backend() == "tcp"
    assert is_rdma_available() and not is_ibverbs_available()


def test_controller_reads_and_writes_an_actors_tensor(owner):
    n = 1 << 20
    buf = owner.make.call_one("w", n, 0.5).get(30)
    assert isinstance(buf, RDMABuffer)
    assert buf.size == 4 * n
    dst = torch.empty(n, dtype=torch.float32)
    buf.read_into(dst).get(30)
    assert torch.equal(dst, torch.arange(n, dtype=torch.float32) + 0.5)

    part = torch.empty(100, dtype=torch.float32)
    buf.read_into(part, offset=4 * 1000).get(30)
    assert torch.equal(part, torch.arange(1000, 1100, dtype=torch.float32) + 0.5)

    buf.write_from(torch.full((10,), -1.0), offset=4 * 20).get(30)
    remote = owner.tensor.call_one("w").get(30)
    assert torch.equal(remote[20:30], torch.full((10,), -1.0))
    assert remote[19].item() == 19.5 and remote[30].item() == 30.5


def test_batch_of_reads_and_writes(owner):
    a = owner.make.call_one("a", 1000, 0.0).get(30)
    b = owner.make.call_one("b", 1000, 5000.0).get(30)
    da, db = torch.empty(500), torch.empty(1000)
    submit([("read", a, da, 2000), ("read", b, db, 0), ("write", a, torch.zeros(4), 0)]).get(30)
    assert torch.equal(da, torch.arange(500, 1000, dtype=torch.float32))
    assert torch.equal(db, torch.arange(1000, dtype=torch.float32) + 5000)
    assert torch.equal(owner.tensor.call_one("a").get(30)[:4], torch.zeros(4))


def test_actor_reads_a_controller_buffer_and_bytes_are_read_only(owner):
    data = bytes(range(256)) * 16
    mine = RDMABuffer(data)
    assert owner.fetch.call_one(mine, 100, 50).get(30) == data[50:150]
    with pytest.raises(RDMAError, match="read-only"):
        mine.write_from(bytearray(4)).get(30)
    mine.drop()


def test_dropped_buffer_fails_clearly(owner):
    buf = owner.make.call_one("d", 64, 0.0).get(30)
    owner.drop.call_one("d").get(30)
    with pytest.raises(RDMAError, match="was dropped") as info:
        buf.read_into(torch.empty(64)).get(30)
    assert info.value.code == "NotFound"


def test_drop_from_a_handle_reaches_the_owner(owner):
    buf = owner.make.call_one("e", 64, 0.0).get(30)
    buf.drop()
    with pytest.raises(RDMAError, match="was dropped"):
        buf.read_into(torch.empty(64)).get(30)


def test_buffers_over_device_memory(owner, device):
    """A buffer over the actor's tensor on ``device`` -- on CUDA registered
    through a host copy its owner refreshes for each read and writes through
    for each write -- read and written from the controller with local memory
    on ``device`` and on the CPU; and a controller buffer on ``device`` read
    by the actor."""
    from conftest import placed_on

    n = 4096
    on = placed_on(device)
    where, buf, refused = owner.make_on.call_one("on_device", n, device).get(30)
    assert where.startswith(on), where
    assert refused is None, refused
    want = torch.arange(n, dtype=torch.float32)
    for dst_device in {on, "cpu"}:
        dst = torch.empty(n, dtype=torch.float32, device=dst_device)
        buf.read_into(dst).get(30)
        assert torch.equal(dst.cpu(), want), dst_device
    # A range, at a byte offset, into memory on the device.
    part = torch.empty(8, dtype=torch.float32, device=on)
    buf.read_into(part, offset=100 * 4).get(30)
    assert torch.equal(part.cpu(), want[100:108])
    # Writes from the CPU and from the device land in the actor's tensor...
    buf.write_from(torch.full((4,), -1.0)).get(30)
    buf.write_from(torch.full((4,), -2.0, device=on), offset=4 * 4).get(30)
    got = owner.tensor.call_one("on_device").get(30)
    assert torch.equal(got[:8].cpu(), torch.tensor([-1.0] * 4 + [-2.0] * 4))
    assert torch.equal(got[8:].cpu(), want[8:])
    # ... and a later read sees them (the host copy is refreshed, not kept).
    dst = torch.empty(8, dtype=torch.float32, device=on)
    buf.read_into(dst).get(30)
    assert torch.equal(dst.cpu(), got[:8].cpu())
    # In a batch, a device destination is filled once the Future completes.
    a, b = torch.empty(2, device=on), torch.empty(2, device=on)
    submit([("read", buf, a, 0), ("read", buf, b, 8 * 4)]).get(30)
    assert a.tolist() == [-1.0, -1.0] and b.tolist() == [8.0, 9.0]
    buf.drop()

    # The controller's own memory on the device, read by the actor.
    mine = torch.arange(64, dtype=torch.float32, device=on) * 3
    local = RDMABuffer(mine)
    raw = owner.fetch.call_one(local, 16, 4 * 4).get(30)
    assert torch.frombuffer(bytearray(raw), dtype=torch.float32).tolist() == [12.0, 15.0, 18.0, 21.0]
    local.drop()


def test_refused_memory_is_named():
    with pytest.raises(RDMAError, match="1-D tensor"):
        RDMABuffer(torch.zeros(4, 4))
    with pytest.raises(RDMAError, match="contiguous"):
        RDMABuffer(torch.zeros(8)[::2])
    with pytest.raises(RDMAError, match="empty"):
        RDMABuffer(torch.zeros(0))
    with pytest.raises(RDMAError, match="torch.Tensor or a buffer"):
        RDMABuffer([1, 2, 3])
    buf = RDMABuffer(torch.zeros(16))
    with pytest.raises(RDMAError, match="exceeds"):
        buf.read_into(torch.empty(16), offset=8).get(10)
    with pytest.raises(RDMAError, match="read-only"):
        buf.read_into(b"immutable").get(10)
    buf.drop()


def _run_with_backend(value: str, code: str) -> str:
    import os
    import subprocess
    import sys

    env = dict(os.environ, MONARCH_RDMA_BACKEND=value)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_backend_none_disables_rdma():
    code = (
        "from monarch.rdma import RDMABuffer, RDMAError, backend\n"
        "print(backend())\n"
        "try:\n"
        "    RDMABuffer(bytearray(8))\n"
        "except RDMAError as e:\n"
        "    print(e)\n"
    )
    lines = _run_with_backend("none", code).splitlines()
    assert lines[0] == "none"
    assert "RDMA is disabled (MONARCH_RDMA_BACKEND=none)" in lines[1]


def test_backend_ibverbs_without_a_device_is_an_error_not_a_fallback():
    code = (
        "from monarch.rdma import RDMABuffer, RDMAError\n"
        "try:\n"
        "    RDMABuffer(bytearray(8))\n"
        "except RDMAError as e:\n"
        "    print(e)\n"
    )
    out = _run_with_backend("ibverbs", code)
    assert out.startswith("MONARCH_RDMA_BACKEND=ibverbs: ")


def test_staging_something_that_is_not_cuda_memory_is_refused():
    """The binding's staged registration checks its device pointer: without
    a CUDA driver, or given host memory, it is a clear error, not a buffer
    whose transfers would copy from a bad address."""
    import monarch._rdma as raw

    host = torch.zeros(16, dtype=torch.uint8)
    with pytest.raises(RDMAError, match="cannot register CUDA memory: (no CUDA driver|"
                                        "address is not device memory)"):
        raw.register(host.data_ptr(), 16, True, host, host.data_ptr())
