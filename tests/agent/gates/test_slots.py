"""The runtime-API diff: endpoint changes become slot commands, structure changes a reload (fake
socket and fake process; test_haproxy.py runs the same against a real HAProxy)."""

from __future__ import annotations

from ccattler.agent.gates.manager import Gates
from ccattler.agent.gates.slots import Slots


def test_an_endpoint_keeps_its_slot_and_a_new_one_takes_the_lowest_free():
    slots = Slots.fresh({"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"})
    assert slots.size == 8
    commands = slots.update("be", {"a": "10.0.0.1", "c": "10.0.0.3", "d": "10.0.0.4"}, 8080)
    assert commands == ["set server be/s2 state maint",
                        "set server be/s2 addr 10.0.0.4 port 8080", "set server be/s2 state ready"]
    assert slots.taken == {1: ("a", "10.0.0.1"), 2: ("d", "10.0.0.4"), 3: ("c", "10.0.0.3")}
    assert slots.update("be", {"a": "10.0.0.1", "c": "10.0.0.3", "d": "10.0.0.4"}, 8080) == []
    moved = slots.update("be", {"a": "10.0.0.9", "c": "10.0.0.3", "d": "10.0.0.4"}, 8080)
    assert moved == ["set server be/s1 state maint", "set server be/s1 addr 10.0.0.9 port 8080",
                     "set server be/s1 state ready"]


def test_growing_keeps_the_slots_of_endpoints_that_stay():
    slots = Slots.fresh({"a": "10.0.0.1", "b": "10.0.0.2"})
    grown = slots.resized({f"i{n:02}": f"10.0.1.{n}" for n in range(10)} | {"b": "10.0.0.2"}, 32)
    assert grown.size == 32 and grown.taken[2] == ("b", "10.0.0.2") and len(grown.taken) == 11


class FakeApi:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.answer = ""

    def command(self, line: str) -> str:
        self.sent.append(line)
        return self.answer


class FakeProcess:
    def __init__(self, tmp_path) -> None:
        self.socket = tmp_path / "haproxy.sock"
        self.configs: list[str] = []
        self.running = False

    def check_paths(self) -> None: ...
    def master_pid(self):
        return 1 if self.running else None

    def write(self, text: str) -> None:
        self.configs.append(text)

    def start_or_reload(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False


def facts(endpoints: dict[str, str], hosts=("shop.example.com",)) -> dict:
    return {"observed/node/n1": {"address": "10.9.0.2"},
            "desired/gate/default/shop": {"hosts": list(hosts), "path": None, "target": "default/web",
                                          "port": 8080, "sticky": {"cookie": "SRV"}},
            "derived/endpoint/default/web": {"endpoints": [{"instance": i, "node": "n1", "ip": ip}
                                                           for i, ip in endpoints.items()]}}


def test_endpoint_changes_go_through_the_runtime_api_and_structure_changes_reload(tmp_path):
    api, process = FakeApi(), FakeProcess(tmp_path)
    gates = Gates("n1", tmp_path, process=process, api=api)
    gates.sync(facts({"web-a": "10.0.0.1"}))
    assert gates.reloads == 1 and api.sent == []
    assert "server s1 10.0.0.1:8080\n" in process.configs[-1]
    gates.sync(facts({"web-a": "10.0.0.1"}))  # nothing changed: nothing sent
    gates.sync(facts({"web-b": "10.0.0.2"}))
    assert gates.reloads == 1 and api.sent == [
        "set server g_default__shop/s1 state maint",
        "set server g_default__shop/s1 addr 10.0.0.2 port 8080", "set server g_default__shop/s1 state ready"]
    gates.sync(facts({"web-b": "10.0.0.2"}, hosts=("shop.example.com", "www.example.com")))
    assert gates.reloads == 2 and "server s1 10.0.0.2:8080\n" in process.configs[-1]
    many = {f"w{n}": f"10.0.1.{n}" for n in range(9)}
    gates.sync(facts(many, hosts=("shop.example.com", "www.example.com")))
    assert gates.reloads == 3 and "server s32 " in process.configs[-1]  # outgrew its 8 slots
    gates.sync({"observed/node/n1": {"address": "10.9.0.2"}})
    assert not process.running


def test_a_refused_command_falls_back_to_a_reload(tmp_path):
    api, process = FakeApi(), FakeProcess(tmp_path)
    gates = Gates("n1", tmp_path, process=process, api=api)
    gates.sync(facts({"web-a": "10.0.0.1"}))
    api.answer = "No such server.\n"
    gates.sync(facts({"web-b": "10.0.0.2"}))
    assert gates.reloads == 2 and "server s1 10.0.0.2:8080\n" in process.configs[-1]


def test_failures_are_logged_not_raised(tmp_path, caplog):
    process = FakeProcess(tmp_path)

    def broken(text: str) -> None:
        raise OSError("disk full")

    process.write = broken
    gates = Gates("n1", tmp_path, process=process, api=FakeApi())
    gates.sync(facts({"web-a": "10.0.0.1"}))
    assert "gates: disk full" in caplog.text and gates.reloads == 0
