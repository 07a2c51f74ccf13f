"""Prometheus metrics: fires, lateness, run outcomes, queue depths, active turns, what other
processes announced or relayed, and the overdue jobs.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agentcron.app import AgentCron
from agentcron.domain.events import Event, FireStarted
from agentcron.domain.jobs import Job
from agentcron.server.relay_events import EventRelay

# Lateness of a fire's start against its nominal time: sub-millisecond to minutes.
_LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0)


class _EngineCollector(Collector):
    """Reads the process's counters and queues at scrape time (nothing to keep in sync)."""

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        status = self._cron.status()
        fires = CounterMetricFamily("agentcron_fires", "Fires claimed by this process")
        fires.add_metric([], status.fires_claimed)
        yield fires
        outcomes = CounterMetricFamily(
            "agentcron_runs_finished", "Runs that reached a terminal state", labels=["state"]
        )
        for state in sorted(status.runs_finished, key=lambda s: s.value):
            outcomes.add_metric([state.value], status.runs_finished[state])
        yield outcomes
        queues = GaugeMetricFamily(
            "agentcron_queue_depth", "Work waiting now, by queue", labels=["queue"]
        )
        queues.add_metric(["fires_waiting"], status.fires_waiting)
        queues.add_metric(["fires_in_lanes"], status.fires_in_lanes)
        queues.add_metric(["turns_waiting"], status.turns_waiting)
        # Saturation: ready to start, but every one of max_concurrent_runs slots is taken.
        queues.add_metric(["awaiting_slot"], status.awaiting_slot)
        # Turns paused for a tool call's approval: they hold their session, not a slot.
        queues.add_metric(["awaiting_approval"], status.awaiting_approval)
        yield queues
        active = GaugeMetricFamily("agentcron_active_turns", "Turns running now")
        active.add_metric([], status.turns_active)
        yield active
        in_runner = GaugeMetricFamily(
            "agentcron_turns_in_runner", "Turns inside their runner now (each holds a slot)"
        )
        in_runner.add_metric([], status.turns_in_runner)
        yield in_runner
        heard = CounterMetricFamily(
            "agentcron_signals_heard", "Changes other processes on the database announced, heard"
        )
        heard.add_metric([], status.signals_heard)
        yield heard


class OverdueCollector(Collector):
    """The jobs overdue now (`service/alerts.py`), as read by the scrape that renders them: one
    `agentcron_job_overdue{job_id, job_name} 1` per overdue job (no series for the others) and
    the total `agentcron_jobs_overdue`.
    """

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        each = GaugeMetricFamily(
            "agentcron_job_overdue",
            "1 for each job overdue now: a fire did not end within its grace",
            labels=["job_id", "job_name"],
        )
        for job in self.jobs:
            each.add_metric([job.id, job.name], 1)
        yield each
        total = GaugeMetricFamily("agentcron_jobs_overdue", "Jobs overdue now")
        total.add_metric([], len(self.jobs))
        yield total


class RelayCollector(Collector):
    """The events the WebSocket hub received from other replicas (`server/relay_events.py`)."""

    def __init__(self, relay: EventRelay) -> None:
        self._relay = relay

    def collect(self) -> Iterator[CounterMetricFamily]:
        received = CounterMetricFamily(
            "agentcron_events_relayed_in", "WebSocket events received from other replicas"
        )
        received.add_metric([], self._relay.received)
        yield received


class Metrics:
    """One registry per server (tests run many in one process)."""

    def __init__(self, cron: AgentCron) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(cron))
        self._cron = cron
        self._overdue = OverdueCollector()
        self.registry.register(self._overdue)
        self.lateness = Histogram(
            "agentcron_fire_lateness_seconds",
            "How late a fire started, against its nominal time",
            buckets=_LATENESS_BUCKETS,
            registry=self.registry,
        )
        self._unsubscribe = cron.subscribe(self._observe, types=[FireStarted])

    def _observe(self, event: Event) -> None:
        if isinstance(event, FireStarted):
            self.lateness.observe(max(0.0, event.lateness_s))

    def close(self) -> None:
        """Stop observing fires (the registry still renders what it has)."""
        self._unsubscribe()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def scrape(self) -> bytes:
        """Read the overdue jobs (one indexed read: only those), then render everything."""
        self._overdue.jobs = await self._cron.alerts.overdue()
        return self.render()
