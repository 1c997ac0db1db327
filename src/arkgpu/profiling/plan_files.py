"""A plan written down: ``arkgpu profile run --plan FILE`` (TOML).

Every field is optional; a field left out keeps the backend's default plan's
value, and a command-line option overrides the file::

    models = ["resnet50", "vgg19"]
    batches = [1, 8, 32]
    shares = [0.25, 0.5, 1.0]
    pairs = "all"                 # or "none", or ["resnet50+vgg19"]
    pair_batches = [4]
    pair_shares = [[0.5, 0.5], [0.2, 0.8]]
    warmup_s = 0.5
    measure_s = 3.0
    min_iterations = 10
    max_iterations = 5000

Errors are one line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from arkgpu.model.settings import Parser, integer, number, parsed, read_toml, text
from arkgpu.profiling.plans import Plan, all_pairs


def _list_of(item: Parser) -> Parser:
    def parse(value: object) -> tuple[Any, ...]:
        if not isinstance(value, list) or not value:
            raise TypeError(f"expected a non-empty list, got {value!r}")
        return tuple(item(v) for v in value)

    return parse


def _share(value: object) -> float:
    share: float = number(0.0, 1.0)(value)
    return share


def _split(value: object) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise TypeError(f"expected a pair of shares [A, B], got {value!r}")
    a, b = _share(value[0]), _share(value[1])
    if a + b > 1.0 + 1e-9:
        raise TypeError(f"expected shares summing to <= 1, got {value!r}")
    return a, b


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 600:
        raise TypeError(f"expected a number of seconds from 0 to 600, got {value!r}")
    return float(value)


def _pairs(value: object) -> str | tuple[str, ...]:
    if value in ("all", "none"):
        return str(value)
    return tuple(_list_of(text)(value))


PARSERS: dict[str, Parser] = {
    "models": _list_of(text),
    "batches": _list_of(integer(1, 4096)),
    "shares": _list_of(_share),
    "pairs": _pairs,
    "pair_batches": _list_of(integer(1, 4096)),
    "pair_shares": _list_of(_split),
    "warmup_s": _seconds,
    "measure_s": number(0.0, 3600.0),
    "min_iterations": integer(1, 100_000),
    "max_iterations": integer(1, 1_000_000),
}
"""How each field is read."""
TIMING_FIELDS = ("warmup_s", "measure_s", "min_iterations", "max_iterations")


def pairs_from(spec: str | tuple[str, ...], models: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``all``, ``none`` or ``A+B`` items as model pairs; ValueError naming a bad item."""
    if spec == "all":
        return all_pairs(models)
    if spec == "none":
        return ()
    pairs = []
    for item in spec if isinstance(spec, tuple) else spec.split(","):
        a, plus, b = item.strip().partition("+")
        if not plus or a not in models or b not in models:
            raise ValueError(f"{item.strip()!r} is not MODEL+MODEL of the models")
        pairs.append((a, b))
    return tuple(pairs)


def plan_from_file(path: Path, base: Plan) -> Plan:
    """``base`` with the fields ``path`` sets; ValueError naming the file and field."""
    values = parsed(read_toml(path), PARSERS, f"{path}: ")
    timing = replace(base.timing, **{k: values.pop(k) for k in TIMING_FIELDS if k in values})
    models = values.get("models", base.models)
    try:
        pairs = pairs_from(values.pop("pairs", "all"), models)
    except ValueError as exc:
        raise ValueError(f"{path}: field pairs: {exc}") from None
    try:
        return replace(base, **values, pairs=pairs, timing=timing)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
