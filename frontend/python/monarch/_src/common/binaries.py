"""Where the build tree's binaries are, for the frontend's layers (actor,
backend) that start them: ``monarch-tensor-worker``, ``monarch-host``."""

from __future__ import annotations

import os


def build_binary(name: str) -> str:
    """bin/<name> of the build tree the package is staged in (build/python/
    monarch -> build/bin), else of build/ beside the sources (frontend/python/
    monarch -> build/bin); "" when neither has it."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    staged = os.path.dirname(os.path.dirname(package))
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(
        os.path.join(package, "__init__.py")))))
    for base in (staged, os.path.join(source, "build")):
        candidate = os.path.join(base, "bin", name)
        if os.path.exists(candidate):
            return candidate
    return ""
