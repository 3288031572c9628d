"""The lab clock: scaled lab time, continuity across speed changes, manual time for unit tests."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from lab.clock import LabClock, ManualClock, ScaledClock, check_speed, parse_time


def test_scaled_clock_runs_speed_lab_seconds_per_real_second() -> None:
    clock = ScaledClock(speed=50)
    start_lab, start_real = clock.now(), time.monotonic()
    time.sleep(0.05)
    lab, real = clock.now() - start_lab, time.monotonic() - start_real
    assert lab == pytest.approx(real * 50, rel=0.2)
    assert clock.real_seconds(10) == pytest.approx(0.2)


def test_speed_change_keeps_lab_time_continuous() -> None:
    real = [50.0]  # the monotonic source, moved by hand: no wall-clock timing in the test
    clock = ScaledClock(speed=100)
    clock._mono = lambda: real[0]  # type: ignore[method-assign]
    clock._base_mono = real[0]
    real[0] = 50.02
    before = clock.now()
    assert before == pytest.approx(2.0)
    clock.speed = 1
    assert clock.now() == pytest.approx(before)  # no jump by the old factor
    real[0] = 51.02
    assert clock.now() == pytest.approx(before + 1)  # one lab second per real second now
    assert clock.speed == 1.0


def test_scaled_wall_is_real_time_and_lab_time_of_scales_the_age() -> None:
    clock = ScaledClock(speed=10)
    assert abs((clock.wall() - datetime.now(UTC)).total_seconds()) < 1
    stamp = datetime.now(UTC) - timedelta(seconds=2)
    assert clock.now() - clock.lab_time_of(stamp) == pytest.approx(20, abs=0.5)


def test_lab_time_of_a_stamp_uses_the_speed_that_held_when_it_was_written() -> None:
    real = [100.0]  # monotonic seconds; the wall clock moves with it
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ScaledClock(speed=10)
    clock._mono = lambda: real[0]  # type: ignore[method-assign]
    clock._utcnow = lambda: epoch + timedelta(seconds=real[0])  # type: ignore[method-assign]
    clock._base_mono = real[0]

    def stamp_at(mono: float) -> datetime:
        return epoch + timedelta(seconds=mono)

    real[0] = 102.0  # 20 lab seconds at 10x
    clock.speed = 100
    real[0] = 103.0  # 100 more at 100x
    assert clock.now() == pytest.approx(120)
    # a stamp from the 10x stretch is as old as it was, plus the 100 lab seconds since
    assert clock.now() - clock.lab_time_of(stamp_at(101.0)) == pytest.approx(110)
    # one from the 100x stretch
    assert clock.now() - clock.lab_time_of(stamp_at(102.5)) == pytest.approx(50)
    clock.speed = 1
    real[0] = 105.0
    assert clock.now() == pytest.approx(122)
    assert clock.now() - clock.lab_time_of(stamp_at(104.0)) == pytest.approx(1)
    assert clock.now() - clock.lab_time_of(stamp_at(101.0)) == pytest.approx(112)
    # before the clock existed: the oldest speed kept
    assert clock.now() - clock.lab_time_of(stamp_at(99.0)) == pytest.approx(132)


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(start=5)
    assert isinstance(clock, LabClock)
    assert clock.now() == 5
    clock.sleep(3)  # advances instead of blocking
    assert clock.advance(2) == 10
    assert clock.wall() == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=10)
    assert clock.lab_time_of(clock.wall()) == 10
    with pytest.raises(ValueError, match=r"only moves forward, got advance\(-1\)"):
        clock.advance(-1)


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_bad_speeds_are_named(bad: float) -> None:
    with pytest.raises(ValueError, match="clock speed must be a finite number > 0"):
        check_speed(bad)
    with pytest.raises(ValueError, match="clock speed"):
        ScaledClock(speed=bad)


def test_parse_time_reads_rfc3339_or_gives_none() -> None:
    assert parse_time("2026-01-01T00:00:01Z") == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert parse_time("2026-01-01T00:00:01.500000Z") is not None
    assert parse_time("yesterday") is None
    assert parse_time(None) is None


def test_lab_config_checks_the_clock_speed() -> None:
    from lab.compose import LabConfig

    assert LabConfig().clock_speed == 10.0
    with pytest.raises(ValueError, match="clock speed must be a finite number > 0, got 0"):
        LabConfig(clock_speed=0)
