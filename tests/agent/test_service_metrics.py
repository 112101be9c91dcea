"""Request rates from HAProxy's `show stat` CSV and connection counts from the data plane, made
coalesced autoscaler samples."""

from __future__ import annotations

import pytest

from ccattler.agent.gates.runtime_api import RuntimeApiError
from ccattler.agent.gates.stats import backend_request_totals
from ccattler.agent.service_metrics import (
    ConnectionLoad,
    Rates,
    ServiceMetrics,
    connection_totals,
    counted_vips,
)

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
    rates = Rates()
    assert rates.sample({"b": 100}, 10.0) == {}
    assert rates.sample({"b": 150}, 20.0) == {"b": 5.0}
    assert rates.sample({"b": 3}, 30.0) == {}  # a reload's new worker starts at zero
    assert rates.sample({"b": 13}, 40.0) == {"b": 1.0}
    assert rates.sample({}, 50.0) == {} and rates.sample({"b": 20}, 60.0) == {}  # gone, then new


def test_metric_documents_are_coalesced_and_dropped_when_unmeasured():
    metrics = ServiceMetrics("n1", refresh=30.0)
    key = "observed/metric/default/web/requests_per_second/n1"
    metrics.update({("default/web", "requests_per_second"): (100.0, "gate")}, 1000.0)
    first = metrics.documents()[key]
    assert first == {"value": 100.0, "time": 1000.0, "source": "gate"}
    metrics.update({("default/web", "requests_per_second"): (105.0, "gate")}, 1010.0)
    assert metrics.documents()[key] is first  # under 10 %: no new document, no write
    metrics.update({("default/web", "requests_per_second"): (120.0, "gate")}, 1020.0)
    assert metrics.documents()[key]["value"] == 120.0
    metrics.update({("default/web", "requests_per_second"): (120.0, "gate")}, 1050.0)
    assert metrics.documents()[key]["time"] == 1050.0  # refreshed before it could go stale
    metrics.update({}, 1055.0, unread=frozenset({"gate"}))
    assert metrics.documents()[key]["time"] == 1050.0  # the gate could not be read: it stays
    metrics.update({}, 1060.0)
    assert metrics.documents() == {}


def test_connections_are_counted_for_marked_vips_not_served_by_a_gate():
    facts = {"derived/vip/default/web": {"ip": "10.96.0.2", "count": "requests_per_second"},
             "derived/vip/default/api": {"ip": "10.96.0.3", "count": "requests_per_second"},
             "derived/vip/default/db": {"ip": "10.96.0.4"}}
    counters = {"10.96.0.2:80/tcp": 5, "10.96.0.2:443/tcp": 7, "10.96.0.3:80/tcp": 9, "10.96.0.4:5432/tcp": 3}
    counted = counted_vips(facts, skip={"default/api"})
    assert counted == {"10.96.0.2": "default/web"}
    assert connection_totals(counted, counters) == {"default/web": 12}
    assert connection_totals(counted_vips(facts, set()), {}) == {"default/web": 0, "default/api": 0}


def test_a_node_reports_connections_only_while_its_clients_use_the_service():
    load = ConnectionLoad(quiet=600.0)
    assert load.sample({"default/web": 0}, 0.0) == {}
    assert load.sample({"default/web": 0}, 10.0) == {}  # never used from here: nothing written
    assert load.sample({"default/web": 50}, 20.0) == {"default/web": 5.0}
    assert load.sample({"default/web": 50}, 30.0) == {"default/web": 0.0}  # stopped: zeros, to scale down
    assert load.sample({"default/web": 50}, 630.0) == {}  # quiet for 10 minutes: no more documents
