"""Python tensors on a mesh across hosts (docs/multi-host.md).

Runs under test/runtime/multihost/netns-hosts.sh (ctest runtime.MultiHostPython),
which starts one monarch-host agent per network namespace and exports their
addresses; skipped elsewhere.
"""

from __future__ import annotations

import os
import re

import pytest
import torch

import monarch
from monarch import fetch_shard
from monarch._session import backend_available
from monarch.actor import attach_hosts

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("MONARCH_TEST_HOSTS"),
        reason="needs host agents: run through test/runtime/multihost/netns-hosts.sh",
    ),
    pytest.mark.skipif(not backend_available("c"), reason="monarch._C is not built"),
]


def test_reduce_across_hosts_and_a_lost_host_is_named() -> None:
    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    hosts = attach_hosts(addrs, secret_file=os.environ["MONARCH_TEST_SECRET_FILE"])
    mesh = hosts.spawn_procs({"gpu": 2})
    assert mesh.sizes == {"hosts": len(addrs), "gpu": 2}
    n = 2 * len(addrs)
    with mesh.activate():
        r = mesh.rank(("hosts", "gpu")).to(torch.float32)
        total = (torch.ones(3) * r).reduce((), "sum")
        per_gpu = r.reduce("hosts", "sum")
    for h in range(len(addrs)):
        for g in range(2):
            assert torch.equal(fetch_shard(total, hosts=h, gpu=g).get(),
                               torch.full((3,), float(n * (n - 1) // 2)))
            # ranks g, 2+g, 4+g, ... of gpu g
            want = sum(2 * k + g for k in range(len(addrs)))
            assert fetch_shard(per_gpu, hosts=h, gpu=g).get().item() == want
    with pytest.raises(NotImplementedError, match="across hosts"):
        mesh.spawn("x", object)
    mesh.stop()


def test_bad_secret_file_is_a_clear_error(tmp_path) -> None:
    addrs = os.environ["MONARCH_TEST_HOSTS"].split(",")
    loose = tmp_path / "secret"
    loose.write_text("00" * 32 + "\n")
    loose.chmod(0o644)
    hosts = attach_hosts(addrs, secret_file=str(loose))
    with pytest.raises(RuntimeError, match=re.escape("chmod 600")):
        hosts.spawn_procs({"gpu": 1})
