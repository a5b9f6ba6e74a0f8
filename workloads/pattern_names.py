"""The load patterns' names, apart from their config models.

`bench list` and shell completion name the patterns without building a pydantic model
(`workloads.pattern_config`), so listing them costs nothing beyond the CLI (issue 13).
`workloads.pattern_config.PARAMS` has one model per name, in this order (a test keeps them equal).
"""

from __future__ import annotations

from typing import Literal, get_args

PatternName = Literal["cosine", "random", "increasing", "decreasing", "convergence", "constant", "trace"]
PATTERN_NAMES: tuple[str, ...] = get_args(PatternName)
