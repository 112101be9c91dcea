"""`cca get/describe service` rows carry the service's VIP and its ready endpoints."""

from ccattler.engine.api import views
from ccattler.engine.store import open_store


def test_a_service_row_shows_its_vip_ports_and_endpoints():
    with open_store("sqlite://:memory:") as store:
        store.put("desired/service/default/web", {"instances": 2, "expose": [{"port": 8080}]})
        store.put("desired/service/default/batch", {"instances": 1})
        store.put("derived/vip/default/web", {
            "service": "default/web", "ip": "10.96.0.3", "range": "10.96.0.0/16",
            "dns": "web.default.cca.local",
            "ports": [{"port": 8080, "protocol": "tcp", "external": False},
                      {"port": 443, "protocol": "tcp", "external": True}]})
        store.put("derived/endpoint/default/web", {
            "ports": [{"port": 8080, "protocol": "tcp"}],
            "endpoints": [{"instance": "web-0", "node": "n1", "ip": "10.88.1.7"},
                          {"instance": "web-1", "node": "n2", "ip": None}]})
        rows = {row["name"]: row for row in views.services(store, None, {})}
    assert rows["web"]["vip"] == "10.96.0.3 (tcp/8080, tcp/443 external)"
    assert rows["web"]["endpoints"] == ["web-0 10.88.1.7 on n1", "web-1 (no address) on n2"]
    assert rows["batch"]["vip"] is None and rows["batch"]["endpoints"] == []
