"""Monarch's ``monarch.job`` on this runtime (docs/python.md, "Jobs"):
``LocalJob`` (its host meshes are ``this_host()``), ``ProcessJob`` (local
``monarch-host`` agents, reused through the job file by a second client and
ended by ``kill()``), job files and the current job's spec."""

from __future__ import annotations

import ast
import os
import pickle
import textwrap

import pytest

from conftest import run_script
from monarch.actor import Actor, endpoint, this_host
from monarch.job import (DEFAULT_JOB_PATH, JobState, JobTrait, LocalJob, ProcessJob, job_load,
                         job_loads, load_current_job, set_current_job)
from waiting import wait_until


class Echo(Actor):
    @endpoint
    def echo(self, x: int) -> int:
        return x + 1


def test_local_job_hosts_are_this_host(tmp_path, monkeypatch):
    pytest.importorskip("monarch._actors")
    monkeypatch.chdir(tmp_path)
    job = LocalJob(hosts=("trainers", "loaders"))
    assert not job.active and job.apply_id is None
    state = job.state()  # applies it and saves it at DEFAULT_JOB_PATH
    assert isinstance(state, JobState)
    assert state.trainers is this_host() and state.loaders is this_host()
    assert job.active and job.apply_id is not None
    assert os.path.exists(tmp_path / DEFAULT_JOB_PATH)
    procs = state.trainers.spawn_procs({"gpus": 2})
    try:
        assert procs.spawn("echo", Echo).echo.call(1).get(timeout=60).values() == [2, 2]
    finally:
        procs.stop()
    with pytest.raises(AttributeError, match="'dataloaders' is not a host mesh of this job; "
                                             "its host meshes are: loaders, trainers"):
        state.dataloaders
    saved = job_load(str(tmp_path / DEFAULT_JOB_PATH))
    assert isinstance(saved, LocalJob) and saved._host_names == ("trainers", "loaders")
    # A local job always runs the spec at hand, never a saved one.
    again = LocalJob(hosts=("other",))
    assert again.state().other is this_host()
    assert job_load().__dict__["_host_names"] == ("other",)
    job.kill()
    assert not job.active


def test_job_files_round_trip_and_refuse_what_is_not_a_job(tmp_path):
    job = LocalJob()
    job.apply()
    again = job_loads(job.dumps())
    assert isinstance(again, LocalJob) and again.active and again.apply_id == job.apply_id
    path = tmp_path / "sub" / "job.pkl"
    job.dump(str(path))  # makes the directory
    assert job_load(str(path)).apply_id == job.apply_id
    link = tmp_path / "link.pkl"
    link.symlink_to(path)
    LocalJob().dump(str(link))  # through the link, to its target
    assert link.is_symlink() and job_load(str(path)).apply_id is None
    with pytest.raises(TypeError, match="not a job"):
        job_loads(pickle.dumps({"a": 1}))
    with pytest.raises(FileNotFoundError):
        job_load(str(tmp_path / "missing.pkl"))
    with pytest.raises(NotImplementedError, match="batch"):
        LocalJob().apply(client_script="train.py")
    with pytest.raises(TypeError, match="names of its host meshes"):
        LocalJob(hosts="trainers")


def test_the_current_job_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "myjobs.py").write_text(textwrap.dedent("""
        from monarch.job import LocalJob
        job = LocalJob(hosts=("workers",))
        not_a_job = 3
    """))
    with pytest.raises(FileNotFoundError, match="set_current_job"):
        load_current_job()
    (tmp_path / ".monarch").mkdir()
    LocalJob().dump(DEFAULT_JOB_PATH)  # a plain job file first: it becomes default's
    set_current_job("myjobs.job")
    assert os.path.islink(DEFAULT_JOB_PATH)
    assert os.readlink(DEFAULT_JOB_PATH) == os.path.join("default", "state.pkl")
    assert isinstance(job_load(os.path.join(".monarch", "default", "state.pkl")), LocalJob)
    job = load_current_job()
    assert isinstance(job, JobTrait) and job._host_names == ("workers",)
    set_current_job("myjobs.not_a_job")
    with pytest.raises(TypeError, match="must be a JobTrait, got int"):
        load_current_job()
    set_current_job("myjobs.missing")
    with pytest.raises(AttributeError, match="has no 'missing' attribute"):
        load_current_job()
    with pytest.raises(ValueError, match="module.attr"):
        set_current_job("nodot")


def test_process_job_checks_its_spec():
    with pytest.raises(TypeError, match="mesh name: number of hosts"):
        ProcessJob([("trainers", 2)])
    with pytest.raises(ValueError, match="positive number of hosts"):
        ProcessJob({"trainers": 0})
    with pytest.raises(RuntimeError, match="batch-mode"):
        ProcessJob({"trainers": 1}).apply(client_script="train.py")
    assert not ProcessJob({"trainers": 1}).can_run(ProcessJob({"trainers": 1}))  # not running


_FIRST = """
import os
from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob

class Where(Actor):
    @endpoint
    def where(self):
        return os.getppid()   # the host agent that started this worker

job = ProcessJob({"trainers": 2, "loaders": 1})
state = job.state()          # applied, and saved at .monarch/job_state.pkl
print("extents=" + str([dict(state.trainers.extent), dict(state.loaders.extent)]))
print("agents=" + str(sorted(h.pid for h in job._hosts.values())))
trainers = state.trainers.spawn_procs(per_host={"gpus": 1})
print("trainer parents=" + str(sorted(trainers.spawn("w", Where).where.call().get().values())))
loaders = state.loaders.spawn_procs(per_host={"gpus": 2})
print("loader parents=" + str(sorted(loaders.spawn("w", Where).where.call().get().values())))
trainers.stop()
loaders.stop()
print("dir=" + repr(job._dir))
"""

_SECOND = """
import os
from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob

class Where(Actor):
    @endpoint
    def where(self):
        return os.getppid()

job = ProcessJob({"trainers": 2, "loaders": 1})
state = job.state()          # the saved job runs this spec: its agents are reused
print("agents=" + str(sorted(h.pid for h in job._running._hosts.values())))
trainers = state.trainers.spawn_procs(per_host={"gpus": 1})
print("trainer parents=" + str(sorted(trainers.spawn("w", Where).where.call().get().values())))
trainers.stop()
job.kill()
print("killed=" + str(job.active))
"""


def _values(stdout: str) -> dict:
    """The script's ``key=value`` lines, values evaluated."""
    out = {}
    for line in stdout.strip().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = ast.literal_eval(value)
    return out


def test_process_job_hosts_are_local_agents_a_second_client_reuses(tmp_path):
    pytest.importorskip("monarch._actors")
    (tmp_path / "first.py").write_text(_FIRST)
    (tmp_path / "second.py").write_text(_SECOND)
    job_file = tmp_path / DEFAULT_JOB_PATH
    try:
        first = run_script(tmp_path / "first.py", timeout=180)
        assert first.returncode == 0, first.stderr
        one = _values(first.stdout)
        assert one["extents"] == [{"hosts": 2}, {"hosts": 1}]
        agents = one["agents"]
        assert len(agents) == 3
        # Each trainer host's worker was started by its own agent, both
        # loader workers by the one loader agent.
        trainer_parents = one["trainer parents"]
        assert len(set(trainer_parents)) == 2 and set(trainer_parents) < set(agents)
        loader_parents = one["loader parents"]
        assert len(loader_parents) == 2 and len(set(loader_parents)) == 1
        assert set(loader_parents) < set(agents)
        job_dir = one["dir"]
        assert os.path.isdir(job_dir) and job_file.exists()
        # The agents outlive the client that applied the job.
        assert all(os.path.exists(f"/proc/{pid}") for pid in agents)

        second = run_script(tmp_path / "second.py", timeout=180)
        assert second.returncode == 0, second.stderr
        two = _values(second.stdout)
        assert two["agents"] == agents
        assert set(two["trainer parents"]) == set(trainer_parents)
        assert two["killed"] is False

        def gone(pid: int) -> bool:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except OSError:
                return True

        wait_until(lambda: all(gone(pid) for pid in agents), timeout=30,
                   what="the job's agents to end")
        assert not os.path.exists(job_dir)  # the secret and the logs went with them
    finally:
        if job_file.exists():  # whatever happened, no agent outlives the test
            left = job_load(str(job_file))
            if left.active and any(os.path.exists(f"/proc/{h.pid}")
                                   for h in left._running._hosts.values()):
                left.kill()
