"""`agentcron next` and `agentcron examples` print specs and fires, errors clearly."""

from __future__ import annotations

from typer.testing import CliRunner

from agentcron.cli import app as main


def test_next_prints_spec_description_and_fires() -> None:
    result = CliRunner().invoke(
        main, ["next", "every", "weekday", "at", "9", "--tz", "Europe/Berlin", "-n", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "every weekday at 09:00 (Europe/Berlin)" in result.output
    assert '"expr":"0 9 * * 1-5"' in result.output
    assert result.output.count("  -> ") == 2


def test_next_rejects_unreadable_phrase_with_usage_error() -> None:
    result = CliRunner().invoke(main, ["next", "whenever"])
    assert result.exit_code == 2
    assert "cannot read 'whenever' as a time; accepted forms" in result.output


def test_examples_runs_every_example() -> None:
    result = CliRunner().invoke(main, ["examples"])
    assert result.exit_code == 0, result.output
    assert "6 fields (a seconds or year field) are not supported" in result.output
    assert "every hour (Australia/Lord_Howe)" in result.output


def test_next_answers_in_the_local_zone_labelled() -> None:
    result = CliRunner().invoke(
        main, ["next", "every", "weekday", "at", "9", "-n", "1"], env={"TZ": "America/New_York"}
    )
    assert result.exit_code == 0, result.output
    assert "every weekday at 09:00 (America/New_York)" in result.output
    (fire,) = [line for line in result.output.splitlines() if line.startswith("  -> ")]
    assert " 09:00:00 America/New_York  (" in fire
    assert fire.endswith(("T14:00:00Z)", "T13:00:00Z)"))  # EST or EDT, in UTC too
    named = CliRunner().invoke(main, ["--tz", "Asia/Tokyo", "next", "tomorrow", "at", "9"])
    assert "09:00:00 Asia/Tokyo" in named.output
    bad = CliRunner().invoke(main, ["--tz", "Mars/Olympus", "next", "in", "1h"])
    assert bad.exit_code == 2
    assert "Mars/Olympus" in bad.output


def test_examples_print_no_microseconds() -> None:
    import re

    result = CliRunner().invoke(main, ["examples"], env={"TZ": "Europe/Berlin"})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("now: ")
    assert result.output.splitlines()[0].endswith(" Europe/Berlin")
    assert re.search(r"\d{2}:\d{2}:\d{2}\.\d", result.output) is None  # no fractions anywhere
