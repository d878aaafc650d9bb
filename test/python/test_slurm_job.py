"""``monarch.job.SlurmJob`` (docs/python.md, "Jobs").

The tests of the argument rules and of the batch script need no SLURM. The
ones that submit a job run under test/runtime/multihost/slurm-cluster.sh
(ctest runtime.MultiHostSlurmPython: a throwaway slurmctld and slurmd "nodes"
in network namespaces), which exports MONARCH_TEST_SLURM_NODES and
MONARCH_TEST_CONTROLLER_HOST; skipped elsewhere.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from monarch._src.tensor.session import backend_available
from monarch.actor import Actor, endpoint
from monarch.job import SlurmJob, job_load

_under_slurm = pytest.mark.skipif(
    not os.environ.get("MONARCH_TEST_SLURM_NODES"),
    reason="needs a SLURM cluster: run through test/runtime/multihost/slurm-cluster.sh")


class Where(Actor):
    @endpoint
    def where(self) -> Any:
        return os.readlink("/proc/self/ns/net"), os.environ.get("SLURMD_NODENAME", ""), os.getpid()


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="mesh name"):
        SlurmJob({"": 1})
    with pytest.raises(ValueError, match="positive number of nodes"):
        SlurmJob({"trainers": 0})
    with pytest.raises(ValueError, match="ntasks_per_node"):
        SlurmJob({"trainers": 1}, ntasks_per_node=0)
    with pytest.raises(TypeError, match="slurm_args is a list"):
        SlurmJob({"trainers": 1}, slurm_args="--exclusive")
    with pytest.raises(NotImplementedError, match="out_of_cluster"):
        SlurmJob({"trainers": 1}, out_of_cluster=True)
    job = SlurmJob({})
    with pytest.raises(ValueError, match="no meshes"):
        job.apply()
    job.add_mesh("trainers", 2)
    with pytest.raises(ValueError, match="positive number of nodes"):
        job.add_mesh("more", -1)


def test_batch_script_asks_for_every_node_and_runs_one_agent_per_task(tmp_path):
    job = SlurmJob({"trainers": 2, "loaders": 1}, ntasks_per_node=2, partition="gpu",
                   gpus_per_node=8, time_limit="01:00:00", log_dir=str(tmp_path),
                   controller_host="10.0.0.1")
    job._dir = str(tmp_path)
    script = job._batch_script("/opt/monarch/bin/monarch-host")
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=2", "#SBATCH --partition=gpu",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --time=01:00:00", "#SBATCH --exclusive",
                 f"#SBATCH --output={tmp_path}/job.out"):
        assert line in script.splitlines(), (line, script)
    srun = script.splitlines()[-1]
    assert srun.startswith("exec srun --nodes=3 --ntasks=6 --ntasks-per-node=2 --label")
    assert "--listen tcp://0.0.0.0:0" in srun and "--reachable-from 10.0.0.1" in srun
    assert f"--secret-file {tmp_path}/job.secret" in srun
    assert "#SBATCH --account" not in script and "#SBATCH --qos" not in script


def test_without_slurm_tools_apply_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch there
    job = SlurmJob({"trainers": 1}, log_dir=str(tmp_path / "logs"))
    with pytest.raises(RuntimeError, match="no 'sbatch' on PATH"):
        job.apply()
    assert not job.active
    assert os.listdir(tmp_path / "logs") == []  # nothing left behind


def _squeue(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                          text=True, timeout=30).stdout.strip()


@_under_slurm
@pytest.mark.skipif(not backend_available("c"), reason="monarch._C is not built")
def test_a_slurm_job_runs_actors_on_its_nodes_and_kill_ends_it(tmp_path):
    nodes = int(os.environ["MONARCH_TEST_SLURM_NODES"])
    per_node = 2 if nodes == 1 else 1
    job = SlurmJob({"trainers": nodes}, ntasks_per_node=per_node, log_dir=str(tmp_path),
                   controller_host=os.environ["MONARCH_TEST_CONTROLLER_HOST"],
                   job_start_timeout=60, exclusive=False)
    try:
        job.apply()
        assert _squeue(job.job_id) in ("PENDING", "CONFIGURING", "RUNNING")
        hosts = job.state(cached_path=None).trainers
        assert hosts.extent == {"hosts": nodes * per_node}
        # The job file: another client attaches to the same agents.
        job.dump(str(tmp_path / "job.pkl"))
        again = job_load(str(tmp_path / "job.pkl"))
        assert again.job_id == job.job_id
        procs = hosts.spawn_procs({"gpu": 1})
        places = procs.spawn("where", Where).where.call().get(timeout=60)
        assert places.sizes == {"hosts": nodes * per_node, "gpu": 1}
        names = {places.item(hosts=h, gpu=0)[1] for h in range(nodes * per_node)}
        assert names == {f"node{i + 1}" for i in range(nodes)}, names
        if nodes > 1:  # each node in its own network namespace, none in ours
            spaces = {places.item(hosts=h, gpu=0)[0] for h in range(nodes)}
            assert len(spaces) == nodes and os.readlink("/proc/self/ns/net") not in spaces
        procs.stop().get()
    finally:
        job_id = job.job_id
        job.kill()
    assert not job.active and job.job_id is None
    assert _squeue(job_id) == ""  # SLURM ended it
    assert not [f for f in os.listdir(tmp_path) if f.startswith("monarch_job-")]


@_under_slurm
def test_a_job_that_does_not_start_times_out_and_kill_ends_it(tmp_path):
    nodes = int(os.environ["MONARCH_TEST_SLURM_NODES"])
    # More nodes than the cluster has: SLURM keeps the job pending (or
    # refuses it, depending on its configuration).
    job = SlurmJob({"trainers": nodes + 5}, log_dir=str(tmp_path), job_start_timeout=3,
                   exclusive=False)
    try:
        job.apply()
    except RuntimeError as e:
        assert "sbatch failed" in str(e)
        assert not job.active and os.listdir(tmp_path) == []
        return
    job_id = job.job_id
    with pytest.raises(TimeoutError, match=r"0 of \d+ agents .* reported within 3 s "
                                           r"\(job state PENDING\)"):
        job.state(cached_path=None)
    job.kill()
    assert _squeue(job_id) == "" and os.listdir(tmp_path) == []
