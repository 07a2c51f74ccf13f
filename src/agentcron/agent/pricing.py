"""Per-model token prices (genai-prices, with an override table) and the cost of a turn."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from genai_prices import Usage, calc_price

__all__ = ["FREE_MODELS", "Price", "PriceTable", "cost_usd", "load_prices"]


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


# pydantic-ai's provider prefixes where genai-prices names the provider otherwise.
_PROVIDERS = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "google-gla": "google",
    "google-vertex": "google",
    "bedrock": "aws",
}
FREE_MODELS = frozenset({"offline"})  # the built-in offline model runs locally: it costs nothing


def _table_price(prices: Mapping[str, Price], model: str) -> Price | None:
    price = prices.get(model)
    if price is None and ":" in model:
        price = prices.get(model.split(":", 1)[1])
    return price


def _genai_price(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """The cost from genai-prices' bundled table (no network), or None for a model it does not
    know.
    """
    provider, sep, name = model.partition(":")
    if not sep:
        provider, name = "", model
    try:
        found = calc_price(
            Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            model_ref=name,
            provider_id=_PROVIDERS.get(provider, provider) or None,
        )
    except LookupError:
        return None
    return float(found.total_price)


def cost_usd(
    prices: Mapping[str, Price],
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    maintained: bool = True,
) -> float | None:
    """The cost of the tokens at `model`'s price, None when no price is known ("unpriced",
    never a made-up 0).

    The override table (`AGENTCRON_PRICES`) wins: `model` looked up as given
    ("openai:gpt-4.1-mini"), then without its provider prefix; else the maintained price table
    of `genai-prices` (not with `maintained=False`: a model served by your own endpoint, whose
    name may match a provider's without its price). The offline model costs 0.
    """
    price = _table_price(prices, model)
    if price is not None:
        total = input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
        # Round away float noise (0.30000000000000004) while keeping sub-cent precision.
        return round(total / 1_000_000, 10)
    if model in FREE_MODELS:
        return 0.0
    if not maintained:
        return None
    found = _genai_price(model, input_tokens, output_tokens)
    return None if found is None else round(found, 10)
