"""``monarch.config``: the runtime's settings under Monarch's API
(docs/python.md, "Monarch compatibility"). The public face of
``monarch._src.common.config``."""

from __future__ import annotations

from .._src.common.config import (
    SETTINGS,
    ConfigError,
    clear_runtime_config,
    configure,
    configured,
    get_global_config,
    get_runtime_config,
    parametrize_config,
    parametrize_config_pointwise,
)

__all__ = [
    "ConfigError",
    "SETTINGS",
    "clear_runtime_config",
    "configure",
    "configured",
    "get_global_config",
    "get_runtime_config",
    "parametrize_config",
    "parametrize_config_pointwise",
]
