"""Rendering HAProxy's config from gate documents (checked by `haproxy -c` when HAProxy is here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ccattler.agent.gates.config import cookie_key, render
from ccattler.agent.gates.model import backend_addresses, gates_from_slice
from ccattler.agent.gates.slots import Slots

SHOP = {"hosts": ["Shop.example.com", "www.example.com"], "path": "/", "target": "default/web",
        "port": 8080, "sticky": {"cookie": "SRV", "secure": True, "http_only": True, "same_site": "strict"},
        "affinity": None}
API = {"hosts": ["shop.example.com"], "path": "/api/", "target": "default/api", "port": 9000, "sticky": None,
       "affinity": "source_ip"}
FACTS = {"desired/gate/default/shop": SHOP, "desired/gate/default/api": API,
         "derived/endpoint/default/web": {
             "service": "default/web", "ports": [],
             "endpoints": [{"instance": "web-a", "node": "n1", "ip": "10.88.1.2"},
                           {"instance": "web-b", "node": "n2", "ip": None}]}}


def rendered(facts=FACTS) -> str:
    gates, problems = gates_from_slice(facts)
    assert not problems
    slots = {g.backend: Slots.fresh(backend_addresses(facts, g)) for g in gates}
    return render(gates, slots, "10.9.0.2", Path("/run/x/haproxy.sock"))


def test_frontend_routes_hosts_and_paths_most_specific_first():
    text = rendered()
    assert "frontend gates_80\n    bind 10.9.0.2:80\n" in text
    assert "req.hdr(host),field(1,:),lower -m str shop.example.com www.example.com" in text
    assert "acl path_g_default__api path /api\n    acl path_g_default__api path_beg /api/\n" in text
    assert text.index("use_backend g_default__api if host_g_default__api path_g_default__api") < text.index(
        "use_backend g_default__shop if host_g_default__shop")
    assert "default_backend gates_no_route" in text


def test_sticky_cookie_and_slots():
    text = rendered()
    shop = text.split("backend g_default__shop\n", 1)[1].split("\n\n", 1)[0]
    assert '    cookie SRV insert indirect nocache dynamic secure httponly attr "SameSite=Strict"' in shop
    # the cookie value is HAProxy's hash of the server's address, port and this key: no per-slot value
    key = cookie_key(gates_from_slice(FACTS)[0][1])
    assert f"    dynamic-cookie-key {key}\n" in shop and len(key) == 32
    assert "    server s1 10.88.1.2:8080\n" in shop  # the address-less endpoint has no slot
    assert "    server s8 127.0.0.1:8080 disabled" in shop and " s9 " not in shop
    api = text.split("backend g_default__api\n", 1)[1].split("\n\n", 1)[0]
    assert "balance source" in api and "cookie" not in api and "server s1 127.0.0.1:9000 disabled" in api


def test_bad_documents_are_skipped_with_a_reason():
    gates, problems = gates_from_slice({"desired/gate/t/a": {"target": "web", "port": 80},
                                        "desired/gate/t/b": {"target": "t/web", "port": 80, "hosts": ["a b"]},
                                        "desired/gate/t/c": {"target": "t/web", "port": 80}})
    assert [g.name for g in gates] == ["t/c"]
    assert problems == ["gate t/a: target 'web' is not tenant/service",
                        "gate t/b: host 'a b' is not a host name"]


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="HAProxy is not installed")
def test_haproxy_accepts_the_config(tmp_path):
    path = tmp_path / "haproxy.cfg"
    path.write_text(rendered())
    done = subprocess.run(["haproxy", "-c", "-f", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
