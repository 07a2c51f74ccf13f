"""Price tables: validation with clear errors, and the cost of a turn's tokens."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentcron.agent.pricing import Price, cost_usd, load_prices


def test_empty_tables() -> None:
    assert load_prices(None) == {}
    assert load_prices({}) == {}


def test_valid_table_becomes_prices() -> None:
    prices = load_prices(
        {
            "openai:gpt-4.1-mini": {"input_per_mtok": 0.4, "output_per_mtok": 1.6},
            "llama3": {"input_per_mtok": 0, "output_per_mtok": 2},
            "half": {"output_per_mtok": 3.5},  # a missing rate is free
            "free": {},
        }
    )
    assert prices == {
        "openai:gpt-4.1-mini": Price(0.4, 1.6),
        "llama3": Price(0.0, 2.0),
        "half": Price(0.0, 3.5),
        "free": Price(0.0, 0.0),
    }
    assert all(isinstance(p.output_per_mtok, float) for p in prices.values())


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"m": {"input_per_mtok": -1}},
            r"'input_per_mtok' of 'm' must be a finite number >= 0, got -1",
        ),
        (
            {"m": {"output_per_mtok": -0.01}},
            r"'output_per_mtok' of 'm' must be a finite number >= 0",
        ),
        (
            {"m": {"input_per_mtok": math.nan}},
            r"'input_per_mtok' of 'm' must be a finite number >= 0, got nan",
        ),
        (
            {"m": {"output_per_mtok": math.inf}},
            r"'output_per_mtok' of 'm' must be a finite number >= 0, got inf",
        ),
        ({"m": {"input_per_mtok": True}}, r"'input_per_mtok' of 'm' must be a number, got True"),
        ({"m": {"input_per_mtok": "0.4"}}, r"'input_per_mtok' of 'm' must be a number, got '0.4'"),
        ({"m": {"output_per_mtok": None}}, r"'output_per_mtok' of 'm' must be a number, got None"),
        (
            {"m": {"input_per_mtok": 1, "cached_per_mtok": 0.1}},
            r"unknown price keys for 'm': \['cached_per_mtok'\]",
        ),
        ({"m": {"input": 1, "output": 2}}, r"unknown price keys for 'm': \['input', 'output'\]"),
        ({"m": 0.4}, r"price entry of 'm' must be a mapping, got 0.4"),
        ({"m": [0.4, 1.6]}, r"price entry of 'm' must be a mapping, got \[0.4, 1.6\]"),
        ({"m": None}, r"price entry of 'm' must be a mapping, got None"),
        ([("m", {"input_per_mtok": 1})], r"prices must be a mapping of model id to prices"),
        ("m=0.4", r"prices must be a mapping of model id to prices, got 'm=0.4'"),
    ],
)
def test_invalid_tables_are_rejected_clearly(table: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_prices(table)


def test_one_bad_entry_rejects_the_whole_table() -> None:
    with pytest.raises(ValueError, match="'bad'"):
        load_prices({"good": {"input_per_mtok": 1}, "bad": {"input_per_mtok": -1}})


PRICES = load_prices(
    {
        "openai:gpt-4.1-mini": {"input_per_mtok": 0.4, "output_per_mtok": 1.6},
        "gpt-4.1-mini": {"input_per_mtok": 100.0, "output_per_mtok": 100.0},
        "llama3": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
        "offline": {"input_per_mtok": 0.1, "output_per_mtok": 0.2},
    }
)


@pytest.mark.parametrize(
    ("model", "tokens", "cost"),
    [
        # the exact id wins over the bare name
        ("openai:gpt-4.1-mini", (1_000_000, 1_000_000), 2.0),
        ("openai:gpt-4.1-mini", (250_000, 50_000), 0.18),
        # without an exact entry, the name without its provider prefix
        ("openai:llama3", (1_000_000, 500_000), 2.0),
        ("ollama:llama3", (2_000, 1_000), 0.004),
        ("llama3", (2_000, 1_000), 0.004),
        ("gpt-4.1-mini", (10_000, 0), 1.0),
        # only the first colon is the provider's: "meta:llama3" is in neither table
        ("openrouter:meta:llama3", (1_000_000, 0), None),
        # not in the override table: the maintained table of genai-prices
        ("anthropic:claude-sonnet-4", (1_000_000, 1_000_000), 18.0),
        ("openai-chat:gpt-4o", (1_000_000, 1_000_000), 12.5),  # pydantic-ai's provider names
        ("google-gla:gemini-2.5-flash", (1_000_000, 1_000_000), 2.8),
        # a model no table knows is unpriced: None, never a cost of 0
        ("mystery", (1_000_000, 1_000_000), None),
        ("function:house", (1, 1), None),
        ("", (1, 1), None),
        # no tokens, no cost
        ("llama3", (0, 0), 0.0),
    ],
)
def test_cost_usd(model: str, tokens: tuple[int, int], cost: float | None) -> None:
    found = cost_usd(PRICES, model, *tokens)
    if cost is None:
        assert found is None
    else:
        assert found == pytest.approx(cost, abs=1e-12)


def test_without_an_override_the_maintained_table_prices_known_models() -> None:
    # gpt-4.1-mini: 0.40 / 1.60 USD per million tokens in genai-prices' table
    assert cost_usd({}, "openai:gpt-4.1-mini", 10**9, 10**9) == 2000.0
    assert cost_usd({}, "offline", 10**9, 10**9) == 0.0  # the local offline model is free
    assert cost_usd({}, "ollama:my-finetune", 10, 10) is None


def test_rounding_removes_float_noise_and_keeps_sub_cent_precision() -> None:
    # 0.1 + 0.2 in floats is 0.30000000000000004; the cost is exactly 0.3.
    assert cost_usd(PRICES, "offline", 1_000_000, 1_000_000) == 0.3
    # one token of a cheap model is still counted, far below a cent
    assert cost_usd(PRICES, "openai:gpt-4.1-mini", 1, 0) == 4e-07
    assert cost_usd(PRICES, "openai:gpt-4.1-mini", 123, 45) == 0.0001212
    # rounded to 10 decimals: a millionth of a millionth of a dollar is nothing
    tiny = load_prices({"tiny": {"input_per_mtok": 1e-6}})
    assert cost_usd(tiny, "tiny", 1, 0) == 0.0
    assert cost_usd(tiny, "tiny", 100_000, 0) == 1e-07
