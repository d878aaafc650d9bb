"""Monarch's jobs: ``from monarch.job import LocalJob, ProcessJob``.

The public face of ``monarch._src.job`` (docs/python.md, "Jobs"): a job's
state is its host meshes by name -- ``this_host()`` for a ``LocalJob``,
local ``monarch-host`` agents for a ``ProcessJob``.
"""

from __future__ import annotations

from .._src.job.job import (DEFAULT_JOB_PATH, JobState, JobTrait, LocalJob, job_load,
                            job_loads, load_current_job, set_current_job)
from .._src.job.process import ProcessJob

__all__ = [
    "DEFAULT_JOB_PATH",
    "JobState",
    "JobTrait",
    "LocalJob",
    "ProcessJob",
    "job_load",
    "job_loads",
    "load_current_job",
    "set_current_job",
]
