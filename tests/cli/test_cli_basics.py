"""CLI basics against a live server: init refuses twice, status, secrets never shown, tokens,
users, audit, and connection errors that name the address and certificate."""

from __future__ import annotations

import yaml


def test_status_and_init_refuses_an_existing_cluster(cli_cluster):
    result = cli_cluster.cca("status")
    assert result.exit_code == 0 and "revision" in result.output
    again = cli_cluster.cca("init", "--server", f"127.0.0.1:{cli_cluster.port}")
    assert again.exit_code == 1 and "already exists" in again.output


def test_secret_set_list_rotate_delete_never_show_the_value(cli_cluster, tmp_path):
    result = cli_cluster.cca("secret", "set", "db.password", "-t", "payments", input="pa55word-xyz")
    assert result.exit_code == 0, result.output
    listed = cli_cluster.cca("secret", "list", "-A")
    assert "payments/db.password" in listed.output and "pa55word" not in listed.output
    assert "NAME" in listed.output and "VERSION" in listed.output
    assert cli_cluster.cca("secret", "rotate", "payments/db.password").exit_code == 0
    as_json = cli_cluster.cca("get", "secrets", "-A", "-o", "json")
    assert "pa55word" not in as_json.output and '"version": 2' in as_json.output
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    assert b"pa55word" not in raw  # not in the SQLite file nor its WAL
    assert cli_cluster.cca("secret", "delete", "payments/db.password").exit_code == 0
    gone = cli_cluster.cca("secret", "delete", "payments/db.password")
    assert gone.exit_code == 1 and "error:" in gone.output


def test_path_like_names_are_refused(cli_cluster):
    result = cli_cluster.cca("secret", "set", "../x", input="v")
    assert result.exit_code == 1 and "not a valid name" in result.output
    result = cli_cluster.cca("get", "gizmos")
    assert result.exit_code == 1 and "unknown kind" in result.output


def test_users_tokens_and_audit(cli_cluster):
    assert cli_cluster.cca("user", "create", "alice", "--team", "storefront").exit_code == 0
    dup = cli_cluster.cca("user", "create", "alice")
    assert dup.exit_code == 1 and "already exists" in dup.output
    token = cli_cluster.cca("user", "token", "alice").output.splitlines()[0]
    assert token.startswith("cca.")
    as_alice = cli_cluster.cca("user", "list", env={"CCA_TOKEN": token})
    assert as_alice.exit_code == 1 and "denied" in as_alice.output
    join = cli_cluster.cca("token", "create", "--ttl", "10m")
    assert join.exit_code == 0 and join.output.startswith("cca.")
    audit = cli_cluster.cca("audit", "-o", "yaml")
    records = yaml.safe_load(audit.output)
    verbs = {(r["verb"], r["decision"]) for r in records}
    assert {("UserCreate", "allowed"), ("UserToken", "allowed"), ("TokenCreate", "allowed"),
            ("UserList", "denied")} <= verbs
    assert all(r["request_id"] and r["principal"] for r in records)


def test_wrong_ca_and_wrong_address_say_what_failed(cli_cluster, tmp_path):
    from ccattler.engine.clientconfig import Context, save_context
    from ccattler.engine.pki import CertificateAuthority, cert_pem

    foreign = tmp_path / "foreign.crt"
    foreign.write_bytes(cert_pem(CertificateAuthority.create().cert))
    default = yaml.safe_load((cli_cluster.home / "config.yaml").read_text())["contexts"]["default"]
    save_context(Context(name="evil", **(default | {"ca": str(foreign)})), make_current=False,
                 home=cli_cluster.home)
    result = cli_cluster.cca("status", "--context", "evil")
    assert result.exit_code == 1
    assert f"127.0.0.1:{cli_cluster.port}" in result.output and str(foreign) in result.output
    result = cli_cluster.cca("status", "--server", "127.0.0.1:1")
    assert result.exit_code == 1 and "127.0.0.1:1" in result.output


def test_join_a_node_with_a_token_once(cli_cluster, tmp_path):
    token = cli_cluster.cca("token", "create", "--ttl", "5m").output.splitlines()[0]
    ca = str(cli_cluster.home / "clusters" / "default" / "ca.crt")
    node_home = {"CCA_HOME": str(tmp_path / "node-home")}
    joined = cli_cluster.cca("join", f"127.0.0.1:{cli_cluster.port}", token, "--ca", ca, "--node", "n1",
                             env=node_home)
    assert joined.exit_code == 0, joined.output
    key = tmp_path / "node-home" / "nodes" / "node" / "n1.key"
    assert key.stat().st_mode & 0o077 == 0
    again = cli_cluster.cca("join", f"127.0.0.1:{cli_cluster.port}", token, "--ca", ca, "--node", "n2",
                            env=node_home)
    assert again.exit_code == 1 and "already used" in again.output
    as_node = cli_cluster.cca("user", "list", env=node_home)  # a node certificate is not an admin
    assert as_node.exit_code == 1 and "denied" in as_node.output


def test_a_denied_watch_is_audited(cli_cluster):
    assert cli_cluster.cca("user", "create", "bob").exit_code == 0
    token = cli_cluster.cca("user", "token", "bob").output.splitlines()[0]
    denied = cli_cluster.cca("watch", "audit/", env={"CCA_TOKEN": token})
    assert denied.exit_code == 1 and "denied" in denied.output
    records = yaml.safe_load(cli_cluster.cca("audit", "-o", "yaml").output)
    assert any((r["verb"], r["principal"], r["decision"]) == ("Watch", "bob", "denied") for r in records)


def test_the_server_runs_the_controllers(cli_cluster_with_runner, tmp_path):
    import json
    import time

    cluster = cli_cluster_with_runner
    (tmp_path / "web.cca").write_text("service web { image nginx:1.27  instances 3 }\n")
    assert cluster.cca("apply", str(tmp_path / "web.cca")).exit_code == 0
    deadline = time.time() + 30
    while time.time() < deadline:
        status = json.loads(cluster.cca("status", "-o", "json").output)
        if status["instances"]["desired"] == 3 and status["leader"]:
            break
        time.sleep(0.3)
    assert status["instances"]["desired"] == 3 and status["leader"]
    instances = json.loads(cluster.cca("get", "instances", "-o", "json").output)
    assert sorted(i["service"] for i in instances) == ["default/web"] * 3


def test_apply_wait_shows_instances_converging(cli_cluster_with_runner, tmp_path):
    """A node agent (here: AgentClient driven by the test) reports the instances ready."""
    import threading
    import time

    from ccattler.engine.api.agent_client import AgentClient
    from ccattler.engine.api.client import Client
    from ccattler.engine.clientconfig import load_config

    cluster = cli_cluster_with_runner
    token = cluster.cca("token", "create").output.splitlines()[0]
    node_env = {"CCA_HOME": str(tmp_path / "node")}
    ca = str(cluster.home / "clusters" / "default" / "ca.crt")
    assert cluster.cca("join", f"127.0.0.1:{cluster.port}", token, "--ca", ca, "--node", "n1",
                       env=node_env).exit_code == 0

    def agent() -> None:  # API clients only: CliRunner is not safe to use from two threads
        with Client(load_config(tmp_path / "node").context()) as client, \
                Client(load_config(cluster.home).context()) as admin:
            # A node reports only instances placed on it (issue 12 class 5): register one first.
            AgentClient(client).register({"capacity": {"cpu": 4000, "memory": 8 << 30}}, ttl=120)
            deadline = time.time() + 30
            while time.time() < deadline:
                rows = admin.get("instances")["items"]
                if len(rows) == 2 and all(r.get("node") == "n1" for r in rows):
                    AgentClient(client).report({f"observed/instance/default/{r['name']}":
                                                {"node": "n1", "state": "running", "ready": True}
                                                for r in rows})
                    return
                time.sleep(0.3)

    worker = threading.Thread(target=agent)
    worker.start()
    (tmp_path / "web.cca").write_text("service web { image nginx:1.27  instances 2 }\n")
    result = cluster.cca("apply", str(tmp_path / "web.cca"), "--wait", "--timeout", "60")
    worker.join()
    assert result.exit_code == 0, result.output
    assert "waiting: web 0/2" in result.output and "all instances ready" in result.output
    (tmp_path / "web.cca").write_text("service web { image nginx:1.28  instances 3 }\n")
    late = cluster.cca("apply", str(tmp_path / "web.cca"), "--wait", "--timeout", "1")
    assert late.exit_code == 1 and "timed out after 1s waiting for web" in late.output


def test_master_key_rotation_through_the_cli(cli_cluster):
    assert cli_cluster.cca("secret", "set", "a", "-t", "shop", input="alpha").exit_code == 0
    assert cli_cluster.cca("secret", "set", "b", input="beta").exit_code == 0
    added = cli_cluster.cca("secret", "master-key", "add")
    assert added.exit_code == 0, added.output
    new_id = added.output.split()[2]
    early = cli_cluster.cca("secret", "master-key", "retire")
    assert early.exit_code == 1 and "still use an older master key" in early.output
    rotated = cli_cluster.cca("secret", "rotate", "--all", "-A")
    assert rotated.exit_code == 0 and f"2 secret(s) rotated; master key {new_id}" in rotated.output
    assert cli_cluster.cca("secret", "master-key", "retire").exit_code == 0
    wide = cli_cluster.cca("secret", "list", "-A", "-o", "wide")
    assert wide.output.count(new_id) == 2 and "alpha" not in wide.output


def test_token_list_and_revoke(cli_cluster, tmp_path):
    token = cli_cluster.cca("token", "create").output.splitlines()[0]
    token_id = token.split(".")[1]
    listed = cli_cluster.cca("token", "list")
    assert listed.exit_code == 0 and token_id in listed.output and token.split(".")[2] not in listed.output
    assert cli_cluster.cca("token", "revoke", token_id).exit_code == 0
    ca = str(cli_cluster.home / "clusters" / "default" / "ca.crt")
    joined = cli_cluster.cca("join", f"127.0.0.1:{cli_cluster.port}", token, "--ca", ca,
                             env={"CCA_HOME": str(tmp_path / "n")})
    assert joined.exit_code == 1 and "unknown, revoked or already used" in joined.output
    bad = cli_cluster.cca("token", "revoke", "../x")
    assert bad.exit_code == 1 and "malformed" in bad.output
