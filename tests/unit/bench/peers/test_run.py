"""bench/peers/run.py: a workload a system cannot run is an n/a cell with the reason."""

from __future__ import annotations

from bench.peers.run import WORKLOADS, Metric, cell, ratios

HERD = next(w for w in WORKLOADS if w.key == "herd")
ALL_S = Metric("all_s", "every fire started", False)


def test_a_system_that_cannot_run_the_herd_shows_n_a_with_the_reason() -> None:
    out = cell(HERD, ALL_S, [{"na": "no sessions"}])
    assert out == {"text": "n/a: no sessions", "value": None, "status": "n/a"}
    assert ratios(HERD, ALL_S, [{"all_s": 1.0, "complete": True}], [{"na": "no sessions"}]) is None


def test_a_figure_a_system_does_not_give_is_a_dash() -> None:
    out = cell(HERD, Metric("rss_mb", "rss", False), [{"rss_mb": None, "complete": True}])
    assert out["text"] == "-"
