"""Progress for people: plain lines off a terminal (rate-limited, heartbeat), a bar on one."""

from __future__ import annotations

import io
import time

import pytest

from arkgpu.bench.progress import ProgressConfig, ProgressReporter, format_duration


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.42, "0.4 s"), (12.4, "12 s"), (92, "1 min 32 s"), (3600 + 5 * 60, "1 h 05 min")],
)
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    """Seconds under 10 with a decimal, then s, min s, h min."""
    assert format_duration(seconds) == text


def test_plain_lines_name_the_work_count_steps_and_end_with_a_total() -> None:
    """Off a terminal: a first line, a line per step when the interval allows, a last line."""
    out = io.StringIO()
    with ProgressReporter("placement", 3, ProgressConfig(interval_s=0.0), out) as progress:
        progress.advance("fgd seed 42")
        progress.advance("fgd seed 43")
        progress.advance("LP bound")
    lines = out.getvalue().splitlines()
    assert lines[0] == "placement: 3 steps"
    assert lines[1].startswith("placement: 1/3 (33%), ")
    assert lines[1].endswith("last: fgd seed 42")
    assert lines[3].startswith("placement: 3/3 (100%)")
    assert lines[-1].startswith("placement: 3/3 done in ")


def test_plain_lines_are_rate_limited_but_the_last_step_always_shows() -> None:
    """Steps closer together than the interval print nothing until the last one."""
    out = io.StringIO()
    with ProgressReporter("runs", 50, ProgressConfig(interval_s=60.0), out) as progress:
        for i in range(50):
            progress.advance(f"run {i}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # header, the 50th step, the total
    assert lines[1].startswith("runs: 50/50 (100%)")


def test_a_long_step_still_prints_a_line_every_interval() -> None:
    """While no step ends, a "running" line appears every interval (here 0.1 s)."""
    out = io.StringIO()
    with ProgressReporter("modes", 2, ProgressConfig(interval_s=0.1), out) as progress:
        progress.note("arkgpu")
        time.sleep(0.8)
    running = [line for line in out.getvalue().splitlines() if line.endswith("(running)")]
    assert 3 <= len(running) <= 12
    assert "last: arkgpu" in running[-1]


def test_on_a_terminal_a_bar_is_drawn_and_no_heartbeat_lines() -> None:
    """A terminal gets rich's bar (n/m shown), not the plain lines."""
    out = FakeTerminal()
    with ProgressReporter("modes", 4, ProgressConfig(interval_s=0.05), out) as progress:
        progress.advance("mps")
        time.sleep(0.3)
    text = out.getvalue()
    assert "(running)" not in text
    assert "modes: 4 steps" not in text
    assert "modes: 1/4 done in" in text


def test_an_error_inside_leaves_no_done_line() -> None:
    """A run that fails does not claim to be done."""
    out = io.StringIO()

    def fail_midway() -> None:
        with ProgressReporter("x", 2, stream=out) as progress:
            progress.advance("one")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert "done in" not in out.getvalue()
