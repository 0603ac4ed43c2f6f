"""The ``[tiers]`` section of the node config: tier 0's size limits and eviction rules.

Sans-IO. Defaults follow upstream ``L2_distributed_storage`` (tier_0_hot_local: 50 MB,
configurable up to 1 GB; evict_from_local: idle 30 days, or utilisation above 0.8)::

    [tiers]
    max_bytes = 52428800     # tier 0's body bytes (upstream default 50 MB, at most 1 GB)
    max_records = 0          # 0: no record-count limit
    high_water = 0.8         # utilisation above which the least-recently-used go
    idle_days = 30           # evict what nobody read for this long (0: never for idleness)
    interval = 60            # s between eviction rounds (a maintenance task, never a read)
    batch = 100              # candidates confirmed with the holding peer per request
    active_tags = []         # the current project's tags: records carrying one stay
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amcp.errors import ConfigError

MB = 1024 * 1024
MAX_TIER0_BYTES = 1024 * MB  # upstream: "50MB (configurable, upper limit 1GB)"


@dataclass(frozen=True, slots=True)
class TierConfig:
    max_bytes: int = 50 * MB
    max_records: int = 0  # 0: no limit on the count
    high_water: float = 0.8
    idle_days: float = 30.0
    interval: float = 60.0
    batch: int = 100
    active_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.max_bytes <= MAX_TIER0_BYTES:
            raise ConfigError(f"tiers.max_bytes: must be from 1 to {MAX_TIER0_BYTES} (1 GB)")
        if self.max_records < 0:
            raise ConfigError("tiers.max_records: must be 0 (no limit) or more")
        if not 0 < self.high_water <= 1:
            raise ConfigError("tiers.high_water: must be in (0, 1]")
        if self.idle_days < 0:
            raise ConfigError("tiers.idle_days: must be 0 (off) or more")
        if self.interval <= 0:
            raise ConfigError("tiers.interval: must be positive")
        if not 1 <= self.batch <= 500:
            raise ConfigError("tiers.batch: must be from 1 to 500")

    def to_dict(self) -> dict[str, Any]:
        return {"max_bytes": self.max_bytes, "max_records": self.max_records,
                "high_water": self.high_water, "idle_days": self.idle_days,
                "interval": self.interval}


_INTS = {"max_bytes", "max_records", "batch"}
_FLOATS = {"high_water", "idle_days", "interval"}


def tiers_from_mapping(section: Any) -> TierConfig:
    if section is None:
        return TierConfig()
    if not isinstance(section, Mapping):
        raise ConfigError("tiers: must be a table")
    unknown = set(section) - _INTS - _FLOATS - {"active_tags"}
    if unknown:
        raise ConfigError(f"tiers: unknown keys {sorted(unknown)}")
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "active_tags":
            if isinstance(value, str) or not isinstance(value, list) or not all(
                    isinstance(t, str) and t for t in value):
                raise ConfigError("tiers.active_tags: must be a list of tags")
            values[key] = tuple(value)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"tiers.{key}: must be a number")
        elif key in _INTS:
            if value != int(value):
                raise ConfigError(f"tiers.{key}: must be a whole number")
            values[key] = int(value)
        else:
            values[key] = float(value)
    return TierConfig(**values)


__all__ = ["MAX_TIER0_BYTES", "TierConfig", "tiers_from_mapping"]
