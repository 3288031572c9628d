"""The lab clock: scaled lab time, continuity across speed changes, manual time for unit tests."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from lab.clock import LabClock, ManualClock, ScaledClock, check_speed, parse_time


def test_scaled_clock_runs_speed_lab_seconds_per_real_second() -> None:
    real = [7.0]
    clock = ScaledClock(speed=50, mono=lambda: real[0])
    start = clock.now()
    real[0] = 7.05
    assert clock.now() - start == pytest.approx(2.5)
    assert clock.real_seconds(10) == pytest.approx(0.2)


def test_scaled_clock_reads_the_monotonic_clock_by_default() -> None:
    clock = ScaledClock(speed=10)
    first = clock.now()
    assert clock.now() >= first  # never goes back
    assert clock.wall().tzinfo is not None


def test_speed_change_keeps_lab_time_continuous() -> None:
    real = [50.0]  # the monotonic source, moved by hand: no wall-clock timing in the test
    clock = ScaledClock(speed=100, mono=lambda: real[0])
    real[0] = 50.02
    before = clock.now()
    assert before == pytest.approx(2.0)
    clock.speed = 1
    assert clock.now() == pytest.approx(before)  # no jump by the old factor
    real[0] = 51.02
    assert clock.now() == pytest.approx(before + 1)  # one lab second per real second now
    assert clock.speed == 1.0


def test_scaled_wall_is_real_time_and_lab_time_of_scales_the_age() -> None:
    clock, real = _hand_clock(speed=10)
    real[0] = 5.0
    assert clock.wall() == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=5)
    stamp = clock.wall() - timedelta(seconds=2)
    assert clock.now() - clock.lab_time_of(stamp) == pytest.approx(20)


def test_lab_time_of_a_stamp_uses_the_speed_that_held_when_it_was_written() -> None:
    real = [100.0]  # monotonic seconds; the wall clock moves with it
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ScaledClock(
        speed=10, mono=lambda: real[0], utcnow=lambda: epoch + timedelta(seconds=real[0])
    )

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
    from lab.spec import LabSpec

    assert LabSpec().clock_speed == 10.0
    with pytest.raises(
        ValueError, match=r"^--clock-speed 0: lab seconds per real second, a number > 0"
    ):
        LabSpec(clock_speed=0)


# --- holding for a starved component --------------------------------------------------------


def _hand_clock(speed: float = 10) -> tuple[ScaledClock, list[float]]:
    real = [0.0]  # the monotonic source, moved by hand
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ScaledClock(
        speed=speed, mono=lambda: real[0], utcnow=lambda: epoch + timedelta(seconds=real[0])
    )
    return clock, real


def test_lab_time_holds_at_an_overdue_component_and_resumes_continuously() -> None:
    clock, real = _hand_clock(speed=10)
    kubelet = object()
    clock.owe(kubelet, 5.0, name="kubelet", hold_after=1.0)  # a renewal due at lab 5
    real[0] = 0.3
    assert clock.now() == pytest.approx(3.0)
    real[0] = 10.0  # the process starved for ten real seconds: 100 lab seconds at 10x
    assert clock.now() == pytest.approx(6.0)  # held one lab second past the due renewal
    real[0] = 12.0
    assert clock.now() == pytest.approx(6.0)  # still held: the kubelet has not caught up
    clock.owe(kubelet, 15.0, name="kubelet")  # renewed; the next one is due at lab 15
    assert clock.now() == pytest.approx(6.0)  # no jump by the time it was held
    real[0] = 12.5
    assert clock.now() == pytest.approx(11.0)  # running at 10x again from where it held
    stats = clock.stats()
    assert stats.holds == 1
    assert stats.by_component == {"kubelet": 1}
    assert stats.held_seconds == pytest.approx(12.0 - 0.6)  # it reached lab 6 at real 0.6


def test_the_earliest_limit_holds_and_a_component_owing_nothing_never_does() -> None:
    clock, real = _hand_clock(speed=10)
    a, b = object(), object()
    clock.owe(a, 20.0, name="a")
    clock.owe(b, 8.0, name="b", hold_after=2.0)
    real[0] = 5.0
    assert clock.now() == pytest.approx(10.0)  # b's limit: 8 + 2
    assert [o.name for o in clock.owed()] == ["b", "a"]
    clock.owe(b, None, name="b")  # caught up, owes nothing more
    real[0] = 6.0
    assert clock.now() == pytest.approx(20.0)  # from 10 at real 5.0, 10 more; a's limit is 21
    real[0] = 9.0
    assert clock.now() == pytest.approx(21.0)
    assert clock.stats().by_component == {"b": 1, "a": 1}


def test_a_stamp_ages_only_by_the_lab_time_that_passed_across_a_hold() -> None:
    clock, real = _hand_clock(speed=10)
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    owner = object()
    clock.owe(owner, 2.0, name="slow", hold_after=1.0)
    real[0] = 0.1
    stamp = epoch + timedelta(seconds=0.1)  # written at lab 1
    real[0] = 5.0  # held at lab 3 since real 0.3
    assert clock.now() - clock.lab_time_of(stamp) == pytest.approx(2.0)
    clock.owe(owner, None, name="slow")
    real[0] = 5.5
    assert clock.now() == pytest.approx(8.0)
    assert clock.now() - clock.lab_time_of(stamp) == pytest.approx(7.0)
    # a stamp written during the hold is as old as the lab time since the hold ended
    during = epoch + timedelta(seconds=4.0)
    assert clock.now() - clock.lab_time_of(during) == pytest.approx(5.0)


def test_a_future_stamp_is_as_far_ahead_in_lab_time_held_or_not() -> None:
    clock, real = _hand_clock(speed=10)
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    real[0] = 1.0
    deadline = epoch + timedelta(seconds=1.0 + 30)  # a deletionTimestamp: now + 30 s grace
    assert clock.lab_time_of(deadline) - clock.now() == pytest.approx(300)
    owner = object()
    clock.owe(owner, clock.now(), name="slow", hold_after=0.0)
    real[0] = 2.0  # held at lab 10 since real 1.0
    assert clock.now() == pytest.approx(10.0)
    assert clock.lab_time_of(deadline) - clock.now() == pytest.approx(290)
    assert clock.lab_time_of(epoch + timedelta(seconds=1.5)) == pytest.approx(10.0)


def test_speed_change_while_held_resumes_at_the_new_speed() -> None:
    clock, real = _hand_clock(speed=10)
    owner = object()
    clock.owe(owner, 1.0, name="x", hold_after=1.0)
    real[0] = 1.0
    assert clock.now() == pytest.approx(2.0)
    clock.speed = 50
    assert clock.now() == pytest.approx(2.0)  # still held
    clock.owe(owner, None, name="x")
    real[0] = 1.1
    assert clock.now() == pytest.approx(7.0)


def test_sleep_waits_lab_seconds_even_while_the_clock_holds() -> None:
    clock = ScaledClock(speed=1000)
    owner = object()
    clock.owe(owner, clock.now(), name="held", hold_after=0.5)
    done = threading.Event()
    threading.Thread(target=lambda: (clock.sleep(2.0), done.set()), daemon=True).start()
    assert not done.wait(0.05)  # 50 lab seconds of real time, but lab time holds below 2
    clock.owe(owner, None, name="held")
    assert done.wait(10)


def test_manual_clock_records_what_is_owed_and_never_holds() -> None:
    clock = ManualClock()
    owner = object()
    clock.owe(owner, 1.0, name="x", hold_after=0.0)
    assert clock.advance(10) == 10
    assert [(o.name, o.due, o.limit) for o in clock.owed()] == [("x", 1.0, 1.0)]
    clock.owe(owner, None, name="x")
    assert clock.owed() == []


def test_wait_change_wakes_when_an_owner_reports() -> None:
    clock = ScaledClock(speed=10)
    woke = threading.Event()

    def waiter() -> None:
        clock.wait_change(30)
        woke.set()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    while not woke.is_set():  # the waiter may not be waiting yet: report until it wakes
        clock.owe(thread, clock.now(), name="reporter")
        clock.owe(thread, None, name="reporter")
        woke.wait(0.01)
    thread.join(5)
    assert not thread.is_alive()


def test_wait_earlier_returns_once_others_finished_what_fell_due_before() -> None:
    """Lab-time order: a pass due at 5 waits for another owner's work due at 2 (not for work
    due at 5 or later: owners due at one instant never wait for each other)."""
    clock = ManualClock()
    pass_owner, kubelet, later, same = object(), object(), object(), object()
    clock.owe(pass_owner, 5.0, name="monitor")
    clock.owe(kubelet, 2.0, name="kubelet")
    clock.owe(later, 9.0, name="later")
    clock.owe(same, 5.0, name="same instant")
    assert clock.wait_earlier(pass_owner, 5.0, timeout=0) == ["kubelet"]
    done: list[list[str]] = []
    waiter = threading.Thread(
        target=lambda: done.append(clock.wait_earlier(pass_owner, 5.0, timeout=30))
    )
    waiter.start()
    clock.owe(kubelet, None, name="kubelet")  # its work is done
    waiter.join(30)
    assert done == [[]]
