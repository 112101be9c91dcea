"""Request rates from HAProxy's `show stat` CSV, and their coalesced metric documents."""

from __future__ import annotations

import pytest

from ccattler.agent.gates.runtime_api import RuntimeApiError
from ccattler.agent.gates.stats import RequestRates, backend_request_totals
from ccattler.agent.service_metrics import ServiceMetrics

CSV = ("# pxname,svname,qcur,stot,req_tot,\n"
       "g_default__shop,BACKEND,0,7,12,\n"
       "g_default__api,BACKEND,0,1,,\n"  # a TCP backend has no request count
       "stats,FRONTEND,0,1,3,\n")


class _Api:
    def __init__(self, answer: str) -> None:
        self.answer = answer

    def command(self, line: str) -> str:
        assert line == "show stat -1 2 -1"
        return self.answer


def test_totals_are_read_per_backend():
    assert backend_request_totals(_Api(CSV)) == {"g_default__shop": 12}


@pytest.mark.parametrize("answer", ["", "Unknown command\n", "# pxname,svname\nx,BACKEND\n"])
def test_an_answer_without_the_counters_is_a_clear_error(answer):
    with pytest.raises(RuntimeApiError, match="HAProxy"):
        backend_request_totals(_Api(answer))


def test_rates_need_two_samples_and_survive_a_reload():
    rates = RequestRates()
    assert rates.sample({"b": 100}, 10.0) == {}
    assert rates.sample({"b": 150}, 20.0) == {"b": 5.0}
    assert rates.sample({"b": 3}, 30.0) == {}  # a reload's new worker starts at zero
    assert rates.sample({"b": 13}, 40.0) == {"b": 1.0}
    assert rates.sample({}, 50.0) == {} and rates.sample({"b": 20}, 60.0) == {}  # gone, then new


def test_metric_documents_are_coalesced_and_dropped_when_unmeasured():
    metrics = ServiceMetrics("n1", refresh=30.0)
    key = "observed/metric/default/web/requests_per_second/n1"
    metrics.update({("default/web", "requests_per_second"): 100.0}, 1000.0, "gate")
    first = metrics.documents()[key]
    assert first == {"value": 100.0, "time": 1000.0, "source": "gate"}
    metrics.update({("default/web", "requests_per_second"): 105.0}, 1010.0, "gate")
    assert metrics.documents()[key] is first  # under 10 %: no new document, no write
    metrics.update({("default/web", "requests_per_second"): 120.0}, 1020.0, "gate")
    assert metrics.documents()[key]["value"] == 120.0
    metrics.update({("default/web", "requests_per_second"): 120.0}, 1050.0, "gate")
    assert metrics.documents()[key]["time"] == 1050.0  # refreshed before it could go stale
    metrics.update({}, 1060.0, "gate")
    assert metrics.documents() == {}
