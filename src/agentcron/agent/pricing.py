"""Per-model token prices and the cost of a turn's usage."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Price", "PriceTable", "cost_usd", "load_prices"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float


PriceTable = Mapping[str, Mapping[str, float]]


def _rate(model: str, entry: Mapping[str, float], key: str) -> float:
    value = entry.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"price {key!r} of {model!r} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"price {key!r} of {model!r} must be a finite number >= 0, got {value}")
    return float(value)


def load_prices(table: PriceTable | None) -> dict[str, Price]:
    """Validate `{"provider:model": {"input_per_mtok": x, "output_per_mtok": y}}` (missing = 0)."""
    if table is not None and not isinstance(table, Mapping):
        raise ValueError(f"prices must be a mapping of model id to prices, got {table!r}")
    prices: dict[str, Price] = {}
    for model, entry in (table or {}).items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"price entry of {model!r} must be a mapping, got {entry!r}")
        unknown = set(entry) - {"input_per_mtok", "output_per_mtok"}
        if unknown:
            raise ValueError(f"unknown price keys for {model!r}: {sorted(unknown)}")
        prices[model] = Price(
            _rate(model, entry, "input_per_mtok"), _rate(model, entry, "output_per_mtok")
        )
    return prices


def cost_usd(
    prices: Mapping[str, Price], model: str, input_tokens: int, output_tokens: int
) -> float:
    """The cost of the tokens at `model`'s price; 0.0 for a model without a price.

    `model` is looked up as given ("openai:gpt-4.1-mini"), then without its provider prefix.
    """
    price = prices.get(model)
    if price is None and ":" in model:
        price = prices.get(model.split(":", 1)[1])
    if price is None:
        return 0.0
    total = input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
    # Round away float noise (0.30000000000000004) while keeping sub-cent precision.
    return round(total / 1_000_000, 10)
