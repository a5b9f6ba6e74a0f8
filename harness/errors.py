"""Validation-error text shared by every typed config (one style of message everywhere)."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError


def nested_errors(exc: ValidationError, prefix: str, model: type[BaseModel] | None = None) -> str:
    """One line per error, paths prefixed (e.g. `params.min_rate: ...`), unknown keys list valid ones."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
            if model is not None and len(err["loc"]) == 1:
                msg += f"; valid fields: {', '.join(model.model_fields) or '(none)'}"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
