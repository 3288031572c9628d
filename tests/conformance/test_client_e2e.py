"""The official Python client's e2e suite against the simulator (see ``client_e2e``).

Skipped, with what to do, unless ``CCM_LAB_CLIENT_E2E`` names a checkout of the client's
repository. The outcome must be exactly: every test passes except those in
:data:`KNOWN_FAILURES` (each needs something the simulator does not have, said in the reason and
in ``tests/conformance/README.md``); a known failure that starts passing fails this test too,
so the list stays true.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.client_e2e import find_suite, run_suite, simulated_cluster

NO_CONTAINER = "needs a running container (exec, attach or port-forward into a pod)"

#: test id -> why it cannot pass on the simulator
KNOWN_FAILURES: dict[str, str] = {
    "test_client.py::TestClient::test_pod_exec_close_channel": NO_CONTAINER,
    "test_client.py::TestClient::test_exit_code": NO_CONTAINER,
    "test_client.py::TestClient::test_portforward_raw": NO_CONTAINER,
    "test_client.py::TestClient::test_portforward_http": NO_CONTAINER,
    "test_client.py::TestClient::test_pod_apis": NO_CONTAINER,
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_client_e2e_suite_passes_on_the_simulator(tmp_path: Path) -> None:
    root, why = find_suite()
    if root is None:
        pytest.skip(why)
    with simulated_cluster(tmp_path) as kubeconfig:
        outcomes = run_suite(root, kubeconfig, tmp_path)
    assert outcomes, "the suite ran no test"
    failed = {name for name, outcome in outcomes.items() if outcome == "failed"}
    unexpected = sorted(failed - KNOWN_FAILURES.keys())
    now_passing = sorted(KNOWN_FAILURES.keys() - failed)
    counts = {
        o: sum(1 for v in outcomes.values() if v == o) for o in ("passed", "failed", "skipped")
    }
    assert not unexpected, f"failed on the simulator: {unexpected} ({counts})"
    assert not now_passing, f"listed as known failures but passed: remove them: {now_passing}"
