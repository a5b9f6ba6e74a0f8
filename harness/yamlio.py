"""YAML read and written through libyaml when PyYAML was built with it.

The pure-Python loader parses a calibrated profile in about 40 ms and a sim run reads
several YAML files, so the C loader is a tenth of a sim run's start-up (issue 13). Both
loaders are PyYAML's safe ones and give the same objects; only the speed differs.
"""

from __future__ import annotations

from typing import IO, Any

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(source: str | bytes | IO[str] | IO[bytes]) -> Any:
    """One YAML document, parsed safely (no arbitrary objects)."""
    return yaml.load(source, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


def dump(data: Any, stream: IO[str] | None = None, **options: Any) -> str | None:
    """`yaml.safe_dump` through libyaml when it is there."""
    return yaml.dump(data, stream, Dumper=SAFE_DUMPER, **options)
