"""Monarch's jobs: ``from monarch.job import LocalJob, ProcessJob, SlurmJob``.

The public face of ``monarch._src.job`` (docs/python.md, "Jobs"): a job's
state is its host meshes by name -- ``this_host()`` for a ``LocalJob``,
local ``monarch-host`` agents for a ``ProcessJob``, agents on the nodes of a
SLURM batch job for a ``SlurmJob``.
"""

from __future__ import annotations

from .._src.job.job import (DEFAULT_JOB_PATH, JobState, JobTrait, LocalJob, job_load,
                            job_loads, load_current_job, set_current_job)
from .._src.job.process import ProcessJob
from .._src.job.slurm import SlurmJob

__all__ = [
    "DEFAULT_JOB_PATH",
    "JobState",
    "JobTrait",
    "LocalJob",
    "ProcessJob",
    "SlurmJob",
    "job_load",
    "job_loads",
    "load_current_job",
    "set_current_job",
]
