"""How the CLI prints a run's token usage and cost."""

from __future__ import annotations


def test_usage_says_unpriced_and_never_shows_an_unknown_cost_as_zero() -> None:
    from agentcron.cli.render import usage

    assert usage(None) == "-"
    run = {"input_tokens": 1200, "output_tokens": 80, "cost_usd": None, "model": "ollama:x"}
    assert usage(run) == "1,200 in / 80 out tokens, unpriced (ollama:x)"
    priced = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0012, "model": "openai:gpt-4o"}
    assert usage(priced) == "10 in / 5 out tokens, $0.001200 (openai:gpt-4o)"
    mixed = {"counted": 3, "input_tokens": 30, "output_tokens": 9, "cost_usd": 0.5, "unpriced": 1}
    assert usage(mixed) == "3 counted, 30 in / 9 out tokens, $0.500000 + 1 unpriced"
    none_priced = {"counted": 2, "input_tokens": 2, "output_tokens": 2, "cost_usd": 0.0,
                   "unpriced": 2}  # fmt: skip
    assert usage(none_priced) == "2 counted, 2 in / 2 out tokens, 2 unpriced"
