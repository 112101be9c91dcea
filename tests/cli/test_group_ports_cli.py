"""`cca apply` refuses two members of a `share network` group exposing one port, whether the clash
is in the files of one apply (the compiler: `group-ports`) or between a group and services applied
apart (admission: `group_port_clash`); the message names the group, the port and both services,
and nothing of the refused file is written."""

from __future__ import annotations

SERVICES = """
service a {
    image busybox
    expose 8080
    resources { cpu 100m  memory 32Mi }
}
service b {
    image busybox
    expose 8080 http
    resources { cpu 100m  memory 32Mi }
}
"""
GROUP = "group pod { service a  service b  share network }\n"


def test_apply_refuses_a_port_clash_in_one_file(cli_cluster, tmp_path) -> None:
    app = tmp_path / "app.cca"
    app.write_text(SERVICES + GROUP)
    out = cli_cluster.cca("apply", str(app))
    assert out.exit_code != 0 and "Traceback" not in out.output, out.output
    assert 'group "default/pod" shares its network, but default/a and default/b both listen on tcp 8080' \
        in out.output, out.output


def test_apply_refuses_a_group_whose_stored_members_clash(cli_cluster, tmp_path) -> None:
    (tmp_path / "svc.cca").write_text(SERVICES)
    (tmp_path / "group.cca").write_text(GROUP)
    assert cli_cluster.cca("apply", str(tmp_path / "svc.cca")).exit_code == 0
    out = cli_cluster.cca("apply", str(tmp_path / "group.cca"))
    assert out.exit_code != 0 and "Traceback" not in out.output, out.output
    assert "create group pod: denied by network [group_port_clash]" in out.output, out.output
    assert 'group "default/pod" shares its network, but default/a and default/b both listen on tcp 8080' \
        in out.output, out.output
    assert "pod" not in cli_cluster.cca("get", "groups").output


def test_apply_refuses_a_member_clashing_with_a_stored_group(cli_cluster, tmp_path) -> None:
    (tmp_path / "group.cca").write_text(GROUP + SERVICES.split("service b")[0])  # the group and a
    (tmp_path / "b.cca").write_text("service b" + SERVICES.split("service b")[1])
    assert cli_cluster.cca("apply", str(tmp_path / "group.cca")).exit_code == 0
    out = cli_cluster.cca("apply", str(tmp_path / "b.cca"))
    assert out.exit_code != 0 and "Traceback" not in out.output, out.output
    assert "create service b: denied by network [group_port_clash]" in out.output, out.output
    assert 'group "default/pod" shares its network, but default/b and default/a both listen on tcp 8080' \
        in out.output, out.output
    assert cli_cluster.cca("get", "services", "b").exit_code != 0
