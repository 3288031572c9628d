"""Lease-based leader election against the fake apiserver."""

from __future__ import annotations

import threading
import time

import pytest

from controller.fake import FakeKube
from controller.runtime.clock import FakeClock
from controller.runtime.kube import Unavailable
from controller.runtime.leader import LeaderElectionConfig, LeaderElector


def elector(kube: FakeKube, identity: str, clock: FakeClock | None = None) -> LeaderElector:
    cfg = LeaderElectionConfig(identity=identity)
    return LeaderElector(
        kube, cfg, on_started_leading=lambda: None, on_stopped_leading=lambda: None, clock=clock
    )


def holder(kube: FakeKube) -> str:
    return str(kube.leases["kube-system/cloud-controller-manager"]["spec"]["holderIdentity"])


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="greater than the renew deadline"):
        LeaderElectionConfig(identity="a", lease_duration=5, renew_deadline=5).validate()
    with pytest.raises(ValueError, match="retry period"):
        LeaderElectionConfig(identity="a", renew_deadline=2, retry_period=2).validate()
    with pytest.raises(ValueError, match="identity"):
        LeaderElectionConfig().validate()


def test_first_acquires_second_waits_for_expiry_by_its_own_clock() -> None:
    kube, clock = FakeKube(), FakeClock()
    a, b = elector(kube, "a", clock), elector(kube, "b", clock)
    assert a.try_acquire_or_renew()
    assert holder(kube) == "a"
    assert not b.try_acquire_or_renew()
    clock.advance(10)
    assert a.try_acquire_or_renew()  # a renews: b observes a change and restarts its timer
    clock.advance(10)
    assert not b.try_acquire_or_renew()  # 10 s since b saw the renewal < 15 s lease
    clock.advance(15)
    assert b.try_acquire_or_renew()  # a stopped renewing: takeover
    lease = kube.leases["kube-system/cloud-controller-manager"]["spec"]
    assert lease["holderIdentity"] == "b"
    assert lease["leaseTransitions"] == 1
    assert lease["leaseDurationSeconds"] == 15
    assert lease["renewTime"].endswith("Z")
    assert not a.try_acquire_or_renew()  # the old leader cannot renew b's lease


def test_release_lets_a_standby_take_over_at_once() -> None:
    kube, clock = FakeKube(), FakeClock()
    a, b = elector(kube, "a", clock), elector(kube, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert holder(kube) == ""
    assert b.try_acquire_or_renew()


def test_run_leads_then_releases_on_stop() -> None:
    kube = FakeKube()
    started, stopped = threading.Event(), threading.Event()
    e = LeaderElector(
        kube,
        LeaderElectionConfig(
            identity="a", lease_duration=1.0, renew_deadline=0.6, retry_period=0.1
        ),
        on_started_leading=started.set,
        on_stopped_leading=stopped.set,
    )
    t = threading.Thread(target=e.run, daemon=True)
    t.start()
    assert started.wait(5)
    assert e.is_leader
    e.stop()
    assert stopped.wait(5)
    t.join(5)
    assert holder(kube) == ""


def test_leadership_is_lost_when_renewals_fail_past_the_deadline() -> None:
    kube, clock = FakeKube(), FakeClock()
    started, stopped = threading.Event(), threading.Event()
    e = LeaderElector(
        kube,
        LeaderElectionConfig(
            identity="a", lease_duration=1.0, renew_deadline=0.5, retry_period=0.1
        ),
        on_started_leading=started.set,
        on_stopped_leading=stopped.set,
        clock=clock,
    )
    t = threading.Thread(target=e.run, daemon=True)
    t.start()
    assert started.wait(5)
    kube.fail("get_lease", *[Unavailable("apiserver down")] * 100)

    def failed_renewals() -> int:
        return sum(1 for verb, _ in kube.requests if verb == "get_lease") - 1  # the acquire

    clock.advance(0.3)  # renewals fail, but the renew deadline has not passed
    deadline = time.monotonic() + 10  # evidence: the elector has tried and failed
    while failed_renewals() < 1 and time.monotonic() < deadline:
        stopped.wait(0.01)
    assert failed_renewals() >= 1
    assert e.is_leader
    assert not stopped.is_set()  # not before the renew deadline
    clock.advance(0.3)  # 0.6 s since the last renewal: past the 0.5 s deadline
    assert stopped.wait(5)
    assert not e.is_leader
    t.join(5)
