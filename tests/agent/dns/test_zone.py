"""The zone: built whole or updated document by document, it serves the same names."""

from __future__ import annotations

import random

from ccattler.agent.dns.zone import Zone


def doc(service: str, tenant: str, *addresses: str, ordinals: int = 0, port: int | None = 80) -> dict:
    name = f"{service}.{tenant}.cca.local"
    records = [{"name": name, "type": "A", "address": a} for a in addresses]
    records += [{"name": f"{service}-{n}.{name}", "type": "A", "address": f"10.88.9.{n + 2}"}
                for n in range(ordinals)]
    if port:
        records.append({"name": f"_{port}._tcp.{name}", "type": "SRV", "priority": 0, "weight": 100,
                        "port": port, "target": name})
    return {"service": f"{tenant}/{service}", "name": name, "ttl": 5, "records": records}


def tables(zone: Zone) -> tuple:
    return ({k: sorted(v) for k, v in zone.a.items()}, {k: sorted(v) for k, v in zone.srv.items()},
            set(zone.nodes))


def test_updates_document_by_document_match_a_zone_built_whole():
    rng = random.Random(7)
    docs: dict[str, dict] = {}
    zone = Zone({})
    for step in range(300):
        key = f"derived/dns/t{rng.randrange(3)}/s{rng.randrange(12)}"
        if key in docs and rng.random() < 0.4:
            del docs[key]
            zone = zone.updated({key: None})
        else:
            tenant, service = key.split("/")[2:]
            docs[key] = doc(service, tenant, f"10.96.{step % 7}.{rng.randrange(1, 250)}",
                            ordinals=rng.randrange(3), port=rng.choice([None, 80, 8080]))
            zone = zone.updated({key: docs[key]})
        assert tables(zone) == tables(Zone(docs)), step
    for key in list(docs):
        zone = zone.updated({key: None})
    assert zone.a == {} and zone.srv == {} and set(zone.nodes) == {"cca.local"}


def test_names_below_a_name_exist_and_malformed_records_are_skipped():
    junk = {"records": [{"name": "x.cca.local", "type": "A"}, "junk",
                        {"name": "example.com", "type": "A", "address": "1.2.3.4"}]}
    zone = Zone([doc("db", "shop", "10.96.0.4", ordinals=2), junk])
    assert {"db.shop.cca.local", "shop.cca.local", "cca.local", "_tcp.db.shop.cca.local"} <= set(zone.nodes)
    assert "x.cca.local" not in zone.a and "example.com" not in zone.nodes
