"""``monarch.config``: the runtime's settings from Python, under Monarch's API
(``configure``, ``configured``, ``get_global_config``, ``get_runtime_config``,
``clear_runtime_config``, ``parametrize_config``,
``parametrize_config_pointwise``; docs/python.md, "Monarch
compatibility").

This runtime is configured by environment variables (``MONARCH_*``, read by
the C++ runtime and the frontend); a setting here is one of them.
``configure`` sets the variable in this process, so procs spawned afterwards
inherit it and the runtime's reads after it see it; ``clear_runtime_config``
puts back what the environment held before. When each one is read (every
``spawn_procs``, once per process, ...) is in :data:`SETTINGS`. Monarch's
keys without a counterpart here are refused with the reason (those whose one
value here is fixed, :data:`FIXED`, accept that value); unknown keys are
refused too.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

__all__ = ["ConfigError", "FIXED", "MONARCH_ONLY", "SETTINGS", "Setting", "clear_runtime_config",
           "configure", "configured", "get_global_config", "get_runtime_config",
           "parametrize_config", "parametrize_config_pointwise"]


class ConfigError(ValueError):
    """A key ``configure`` does not know, or a Monarch key this runtime has
    no counterpart for."""


@dataclass(frozen=True)
class Setting:
    """One setting: its environment variable, its type ("bool", "int", "ms"
    -- milliseconds, also given as "30s"/"500ms"/"2m" -- or "str"), the
    values it may take, what the runtime does without it, and when it is
    read."""

    env: str
    kind: str
    default: Any
    read: str
    doc: str
    choices: Tuple[str, ...] = ()
    minimum: int = 0


SETTINGS: Dict[str, Setting] = {
    "backend": Setting("MONARCH_BACKEND", "str", "c", "every spawn_procs",
                       "where tensor work runs: 'c' (worker processes) or 'sim' (in-process)",
                       ("c", "sim")),
    "tensor_worker": Setting("MONARCH_TENSOR_WORKER_KIND", "str", "native", "every spawn_procs",
                             "the tensor worker of a rank: 'native' (C++) or 'python'",
                             ("native", "python")),
    "worker_memory_cap": Setting("MONARCH_WORKER_MEMORY_CAP", "int", 0, "every spawn_procs",
                                 "CPU tensor memory cap per worker in bytes (0: none)"),
    "heartbeat_interval_ms": Setting("MONARCH_HEARTBEAT_MS", "ms", 500, "every spawn_procs",
                                     "how often each proc tells its parent it is alive "
                                     "(0: no liveness checks)"),
    "unresponsive_timeout_ms": Setting("MONARCH_UNRESPONSIVE_MS", "ms", 4000,
                                       "every spawn_procs",
                                       "a proc silent this long is unresponsive (a supervision "
                                       "event); 0: no liveness checks"),
    "max_procs_per_host": Setting("MONARCH_MAX_PROCS_PER_HOST", "int", None,
                                  "every spawn_procs",
                                  "the most procs one host starts (default: from the cores)",
                                  minimum=1),
    "bind_cores": Setting("MONARCH_BIND_CORES", "bool", False, "when a tensor worker starts",
                          "pin each tensor worker's threads to its share of the cores"),
    "log_level": Setting("MONARCH_LOG", "str", "info", "once per process, at its first log line",
                         "the runtime's log threshold", ("debug", "info", "error")),
    "rdma_backend": Setting("MONARCH_RDMA_BACKEND", "str", "auto",
                            "once per process, at its first RDMA use",
                            "RDMA transport: 'auto' (ibverbs, else TCP), 'ibverbs', 'tcp', 'none'",
                            ("auto", "ibverbs", "tcp", "none")),
    "rdma_disable_ibverbs": Setting("MONARCH_RDMA_DISABLE_IBVERBS", "bool", False,
                                    "once per process, at its first RDMA use",
                                    "use TCP for RDMA even where ibverbs works (Monarch's key)"),
    "rdma_timeout_ms": Setting("MONARCH_RDMA_TIMEOUT_MS", "ms", None,
                               "once per process, at its first RDMA use",
                               "deadline of one RDMA operation"),
    "compile_timeout_ms": Setting("MONARCH_COMPILE_TIMEOUT_MS", "ms", 600000,
                                  "every monarch-opt run",
                                  "how long one run of the compiler (monarch.trace, "
                                  "monarch.compile, monarch.Simulator) may take", minimum=1),
}

# Monarch's configure() keys (python/monarch/config) with no counterpart
# here, and why.
_NO_SPAWN_ENV = "give spawn_procs(timeout_ms=...) instead"
_HYPERACTOR = "a setting of Monarch's Rust runtime (hyperactor); this runtime has none like it"
_FORWARDED = ("the output of every proc is forwarded to the controller's stdout and stderr, "
              "line by line, prefixed with [<mesh> rank <r>]; it is not kept in files")

# Monarch's keys whose one value here is fixed: that value is accepted (and
# does nothing), the other is refused with the reason.
FIXED: Dict[str, Tuple[Any, str]] = {
    "enable_log_forwarding": (True, _FORWARDED),
    "prefix_with_rank": (True, _FORWARDED),
}
MONARCH_ONLY: Dict[str, str] = {
    "default_transport": "procs of one host talk over Unix sockets and hosts over TCP; there "
                         "is no transport to choose",
    "enable_file_capture": _FORWARDED,
    "tail_log_lines": _FORWARDED,
    "read_log_buffer": _FORWARDED,
    "force_file_log": _FORWARDED,
    "host_spawn_ready_timeout": _NO_SPAWN_ENV,
    "mesh_proc_spawn_max_idle": _NO_SPAWN_ENV,
    "actor_spawn_max_idle": _NO_SPAWN_ENV,
    "rdma_allow_tcp_fallback": "give rdma_backend='ibverbs' (no fallback) or 'auto'",
    "supervision_watchdog_timeout": "give unresponsive_timeout_ms (procs, not the controller)",
    "default_encoding": "messages are pickles with tensors as raw frames; there is no choice",
    "codec_max_frame_length": _HYPERACTOR,
    "message_delivery_timeout": _HYPERACTOR,
    "process_exit_timeout": _HYPERACTOR,
    "message_ack_time_interval": _HYPERACTOR,
    "message_ack_every_n_messages": _HYPERACTOR,
    "message_ttl_default": _HYPERACTOR,
    "split_max_buffer_size": _HYPERACTOR,
    "split_max_buffer_age": _HYPERACTOR,
    "stop_actor_timeout": _HYPERACTOR,
    "cleanup_timeout": _HYPERACTOR,
    "remote_allocator_heartbeat_interval": _HYPERACTOR,
    "channel_net_rx_buffer_full_check_interval": _HYPERACTOR,
    "message_latency_sampling_rate": _HYPERACTOR,
    "enable_dest_actor_reordering_buffer": _HYPERACTOR,
    "mesh_bootstrap_enable_pdeathsig": _HYPERACTOR,
    "mesh_terminate_concurrency": _HYPERACTOR,
    "mesh_terminate_timeout": _HYPERACTOR,
    "shared_asyncio_runtime": _HYPERACTOR,
    "small_write_threshold": _HYPERACTOR,
    "max_cast_dimension_size": _HYPERACTOR,
    "remote_alloc_bind_to_inaddr_any": _HYPERACTOR,
    "remote_alloc_bootstrap_addr": _HYPERACTOR,
    "remote_alloc_allowed_port_range": _HYPERACTOR,
    "get_actor_state_max_idle": _HYPERACTOR,
    "proc_stop_max_idle": _HYPERACTOR,
    "get_proc_state_max_idle": _HYPERACTOR,
    "actor_queue_dispatch": _HYPERACTOR,
    "mesh_orphan_timeout": _HYPERACTOR,
}

_INT64_MAX = 2**63 - 1
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_DURATION = re.compile(r"(\d+)\s*(ms|s|min|m|h)")

# What configure() set: key -> value, and each variable's value before it.
_runtime: Dict[str, Any] = {}
_saved_env: Dict[str, Optional[str]] = {}


def _duration_ms(key: str, value: str) -> int:
    text = value.strip()
    parts = _DURATION.findall(text)
    if not parts or _DURATION.sub("", text).strip():
        raise ValueError(f"{key}: '{value}' is not a duration (like '500ms', '30s', '1m 30s')")
    return sum(int(n) * _UNITS_MS[unit] for n, unit in parts)


def _check(key: str, value: Any) -> Any:
    """The value of ``key`` as stored, or TypeError/ValueError."""
    s = SETTINGS[key]
    if s.kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{key} takes a bool, got {type(value).__name__}")
        return value
    if s.kind in ("int", "ms"):
        if s.kind == "ms" and isinstance(value, str):
            value = _duration_ms(key, value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key} takes an int{' or a duration string' if s.kind == 'ms' else ''}"
                            f", got {type(value).__name__}")
        if value < s.minimum:
            raise ValueError(f"{key} must be at least {s.minimum}, got {value}")
        if value > _INT64_MAX:  # what the runtime reads (strtoll)
            raise ValueError(f"{key} must be at most {_INT64_MAX}, got {value}")
        return value
    if not isinstance(value, str):
        raise TypeError(f"{key} takes a str, got {type(value).__name__}")
    if s.choices and value not in s.choices:
        raise ValueError(f"{key} must be one of {', '.join(s.choices)}; got '{value}'")
    return value


def _to_env(s: Setting, value: Any) -> str:
    if s.kind == "bool":
        return "1" if value else "0"
    return str(value)


def _from_env(key: str, text: str) -> Any:
    s = SETTINGS[key]
    if s.kind == "bool":
        return text.strip().lower() not in ("", "0", "false", "no", "off")
    if s.kind in ("int", "ms"):
        try:
            return int(text)
        except ValueError:
            return text  # the runtime ignores it; show what is there
    return text


def _refuse(key: str) -> ConfigError:
    if key in MONARCH_ONLY:
        return ConfigError(f"monarch.config: '{key}' is a Monarch setting this runtime does "
                           f"not have: {MONARCH_ONLY[key]}")
    return ConfigError(f"monarch.config: no setting '{key}'; the settings are "
                       f"{', '.join(sorted(SETTINGS))}")


def configure(**settings: Any) -> None:
    """Sets each setting (its environment variable) in this process; all
    are checked before any is set. ``None`` leaves a setting as it is."""
    checked = {}
    for key, value in settings.items():
        if key in FIXED:
            fixed, why = FIXED[key]
            if value is not None and value != fixed:
                raise ConfigError(f"monarch.config: {key}={value!r} is not possible here: {why}")
            if value is not None:
                checked[key] = value
            continue
        if key not in SETTINGS:
            raise _refuse(key)
        if value is not None:
            checked[key] = _check(key, value)
    for key, value in checked.items():
        if key in FIXED:
            _runtime[key] = value
            continue
        s = SETTINGS[key]
        if s.env not in _saved_env:
            _saved_env[s.env] = os.environ.get(s.env)
        os.environ[s.env] = _to_env(s, value)
        _runtime[key] = value


def get_runtime_config() -> Dict[str, Any]:
    """What ``configure`` set (and ``clear_runtime_config`` has not undone)."""
    return dict(_runtime)


def get_global_config() -> Dict[str, Any]:
    """Every setting's value now: from ``configure``, else the environment,
    else the runtime's default (None: the runtime works it out)."""
    out: Dict[str, Any] = {}
    for key, s in SETTINGS.items():
        text = os.environ.get(s.env)
        out[key] = _from_env(key, text) if text not in (None, "") else s.default
    for key, (fixed, _) in FIXED.items():
        out[key] = fixed
    return out


def clear_runtime_config() -> None:
    """Undoes every ``configure``: each variable as the environment held it."""
    for env, before in _saved_env.items():
        if before is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = before
    _saved_env.clear()
    _runtime.clear()


@contextlib.contextmanager
def configured(**settings: Any) -> Iterator[Dict[str, Any]]:
    """``with configured(log_level="debug") as config:`` -- the settings for
    the block (``config`` is ``get_global_config()``), then as before. The
    environment is the process's: other threads see the settings too."""
    before = get_runtime_config()
    try:
        configure(**settings)
        yield get_global_config()
    finally:
        clear_runtime_config()
        configure(**before)


def _check_keys(options: Dict[str, Any], what: str) -> None:
    if not options:
        raise ValueError(f"{what} needs at least one setting")
    for key, values in options.items():
        if key not in SETTINGS:
            raise _refuse(key)
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{what} takes each setting's values as a set or a list: "
                            f"'{key}' got {type(values).__name__}")


def parametrize_config(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A pytest decorator running the test once per combination of the
    given values (``parametrize_config(backend={"c", "sim"})``), each under
    ``configured(...)``."""
    _check_keys(options, "parametrize_config")
    keys = list(options)
    combos = [dict(zip(keys, values)) for values in itertools.product(
        *[sorted(options[k], key=repr) for k in keys])]
    return _parametrized(combos)


def parametrize_config_pointwise(
        **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Like :func:`parametrize_config`, but the i-th run takes the i-th
    value of every sequence (``zip``); the sequences must be of one length."""
    _check_keys(options, "parametrize_config_pointwise")
    lengths = {k: len(list(v)) for k, v in options.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"parametrize_config_pointwise needs sequences of one length, got "
                         f"{lengths}")
    keys = list(options)
    combos = [dict(zip(keys, values)) for values in zip(*[list(options[k]) for k in keys])]
    return _parametrized(combos)


def _parametrized(
        combos: List[Dict[str, Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A pytest parametrize decorator: the test once under each
    ``configured(**combo)``."""
    import functools
    import inspect

    import pytest

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, _monarch_config: Dict[str, Any], **kw: Any) -> Any:
                with configured(**_monarch_config):
                    return await fn(*args, **kw)
            wrapper: Callable[..., Any] = run_async
        else:
            @functools.wraps(fn)
            def run(*args: Any, _monarch_config: Dict[str, Any], **kw: Any) -> Any:
                with configured(**_monarch_config):
                    return fn(*args, **kw)
            wrapper = run
        sig = inspect.signature(fn)
        wrapper.__signature__ = sig.replace(parameters=[  # type: ignore[attr-defined]
            *sig.parameters.values(),
            inspect.Parameter("_monarch_config", inspect.Parameter.KEYWORD_ONLY)])
        ids = [",".join(f"{k}={v}" for k, v in c.items()) for c in combos]
        return pytest.mark.parametrize("_monarch_config", combos, ids=ids)(wrapper)

    return deco
