"""Prometheus metrics: fires, lateness, run outcomes, queue depths and active turns."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agentcron.app import AgentCron
from agentcron.store.models import TERMINAL_STATES, ClaimedFire

# Lateness of a fire's start against its nominal time: sub-millisecond to minutes.
_LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0)


class _EngineCollector(Collector):
    """Reads the engine's counters and queues at scrape time (nothing to keep in sync)."""

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        engine = self._cron.engine
        fires = CounterMetricFamily("agentcron_fires", "Fires claimed by this process")
        fires.add_metric([], engine.stats["claimed"])
        yield fires
        outcomes = CounterMetricFamily(
            "agentcron_runs_finished", "Runs that reached a terminal state", labels=["state"]
        )
        for state in sorted(TERMINAL_STATES, key=lambda s: s.value):
            outcomes.add_metric([state.value], engine.stats[state.value])
        yield outcomes
        queues = GaugeMetricFamily(
            "agentcron_queue_depth", "Work waiting now, by queue", labels=["queue"]
        )
        queues.add_metric(["fires_waiting"], engine.waiting_runs)
        queues.add_metric(["fires_in_lanes"], engine.lanes.parked)
        queues.add_metric(["turns_waiting"], engine.lanes.queued_turns)
        yield queues
        active = GaugeMetricFamily("agentcron_active_turns", "Turns running now")
        active.add_metric([], engine.lanes.active_turns)
        yield active


class Metrics:
    """One registry per server (tests run many in one process)."""

    def __init__(self, cron: AgentCron) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(cron))
        self.lateness = Histogram(
            "agentcron_fire_lateness_seconds",
            "How late a fire started, against its nominal time",
            buckets=_LATENESS_BUCKETS,
            registry=self.registry,
        )
        cron.engine.fire_observers.append(self._observe)

    def _observe(self, fire: ClaimedFire, lateness: float) -> None:
        self.lateness.observe(max(0.0, lateness))

    def render(self) -> bytes:
        return generate_latest(self.registry)
