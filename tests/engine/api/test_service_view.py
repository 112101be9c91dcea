"""`cca get/describe service` rows carry the service's VIP, its DNS name and its ready endpoints."""

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
        store.put("derived/dns/default/web", {
            "service": "default/web", "name": "web.default.cca.local", "ttl": 5,
            "records": [{"name": "web.default.cca.local", "type": "A", "address": "10.96.0.3"}]})
        rows = {row["name"]: row for row in views.services(store, None, {})}
    assert rows["web"]["vip"] == "10.96.0.3 (tcp/8080, tcp/443 external)"
    assert rows["web"]["endpoints"] == ["web-0 10.88.1.7 on n1", "web-1 (no address) on n2"]
    assert rows["web"]["dns"] == "web.default.cca.local"
    assert rows["batch"]["vip"] is None and rows["batch"]["endpoints"] == [] and rows["batch"]["dns"] is None


def test_a_stateful_services_dns_line_names_its_ordinals_and_a_bad_name_says_why():
    with open_store("sqlite://:memory:") as store:
        store.put("desired/service/shop/db", {"instances": 4, "stateful": True})
        store.put("desired/service/shop/my_app", {"instances": 1, "expose": [{"port": 80}]})
        store.put("derived/dns/shop/db", {"service": "shop/db", "name": "db.shop.cca.local", "ttl": 5,
                                          "records": [{"name": "db.shop.cca.local", "type": "A", "address": a}
                                                      for a in ("10.88.1.2", "10.88.1.3")]
                                          + [{"name": f"db-{n}.db.shop.cca.local", "type": "A",
                                              "address": f"10.88.1.{n + 2}"} for n in range(4)]})
        store.put("derived/dns/shop/my_app", {"service": "shop/my_app", "name": None, "ttl": 5, "records": [],
                                              "error": "service name 'my_app' is not a DNS label"})
        rows = {row["name"]: row for row in views.services(store, None, {})}
    assert rows["db"]["dns"] == "db.shop.cca.local (ordinals db-0.db.shop.cca.local … db-3.db.shop.cca.local)"
    assert rows["my_app"]["dns"] == "none: service name 'my_app' is not a DNS label"
