"""Typed methods for the Cluster calls the CLI makes, so no command builds a protobuf request or
names a method by string (`Client` inherits them; engine/api/client.py holds the channel).

Calls that answer JSON return the decoded value; the token calls return their reply (`token`,
`expires`); streams yield their messages as they arrive."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ccattler.engine.api.gen.ccattler.v1 import api_pb2

#: What `exec_session` reads from its `inputs`: bytes for stdin, `STDIN_CLOSED` at its end, or a
#: `(rows, cols)` pair when the local terminal is resized.
STDIN_CLOSED = None


class ClusterCalls:
    """Mixed into `Client`, which provides `json`, `unary`, `stream` and the `cluster` stub."""

    cluster: Any

    # The cluster and what the caller is.

    def status(self) -> dict[str, Any]:
        return self.json("Status")

    def who_am_i(self) -> dict[str, Any]:
        return self.json("WhoAmI")

    def audit(self, limit: int) -> list[dict[str, Any]]:
        return self.json("Audit", api_pb2.AuditRequest(limit=limit))["items"]

    # Objects.

    def delete(self, kind: str, name: str, tenant: str = "") -> dict[str, Any]:
        return self.json("Delete", api_pb2.DeleteRequest(kind=kind, name=name, tenant=tenant))

    def explain(self, target: str, tenant: str = "") -> dict[str, Any]:
        return self.json("Explain", api_pb2.ExplainRequest(target=target, tenant=tenant))

    def explain_network(self, kind: str, source: str, destination: str, tenant: str = "") -> dict[str, Any]:
        return self.json("ExplainNetwork", api_pb2.ExplainNetworkRequest(
            kind=kind, source=source, destination=destination, tenant=tenant))

    def scale(self, service: str, instances: int, tenant: str = "", dry_run: bool = False) -> dict[str, Any]:
        return self.json("Scale", api_pb2.ScaleRequest(service=service, tenant=tenant, instances=instances,
                                                       dry_run=dry_run))

    def top(self, kind: str, tenant: str = "", all_tenants: bool = False,
            tags: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        return self.json("Top", api_pb2.GetRequest(kind=kind, tenant=tenant, all_tenants=all_tenants,
                                                   tags=dict(tags or {})))["items"]

    def metric_set(self, service: str, name: str, value: float, tenant: str = "") -> dict[str, Any]:
        return self.json("MetricSet", api_pb2.MetricRequest(service=service, tenant=tenant, name=name,
                                                            value=value))

    def node_intent(self, node: str, intent: str) -> dict[str, Any]:
        """`drain`, `disable` or `enable` (which removes the intent) a node."""
        return self.json("NodeIntent", api_pb2.NodeIntentRequest(node=node, intent=intent))

    def node_inspect(self, node: str, dataplane: bool = False, timeout: float = 30) -> dict[str, Any]:
        """What the node's runtime holds, or (`dataplane`) what its kernel's data plane enforces."""
        return self.json("NodeInspect", api_pb2.GetRequest(name=node, kind="dataplane" if dataplane else ""),
                         timeout=timeout)

    def rollout(self, action: str, service: str, tenant: str = "", dry_run: bool = False) -> dict[str, Any]:
        """`status`, `history` or `undo` of the service's rolling update."""
        return self.json("Rollout", api_pb2.RolloutRequest(service=service, tenant=tenant, action=action,
                                                           dry_run=dry_run))

    # Operator policies.

    def policy_apply(self, name: str, text: str) -> dict[str, Any]:
        return self.json("PolicyApply", api_pb2.PolicyRequest(name=name, text=text))

    def policy_list(self) -> list[dict[str, Any]]:
        return self.json("PolicyList", api_pb2.Empty())["items"]

    def policy_delete(self, name: str) -> dict[str, Any]:
        return self.json("PolicyDelete", api_pb2.PolicyRequest(name=name))

    # Secrets: `name` "*" means every secret of `tenant`, "**" every secret of every tenant.

    def secret_set(self, name: str, tenant: str, value: bytes) -> dict[str, Any]:
        return self.json("SecretSet", api_pb2.SecretRequest(name=name, tenant=tenant, value=value))

    def secret_list(self, tenant: str = "", all_tenants: bool = False) -> list[dict[str, Any]]:
        request = api_pb2.SecretRequest(name="*" if all_tenants else "", tenant=tenant)
        return self.json("SecretList", request)["items"]

    def secret_delete(self, name: str, tenant: str = "") -> dict[str, Any]:
        return self.json("SecretDelete", api_pb2.SecretRequest(name=name, tenant=tenant))

    def secret_rotate(self, name: str, tenant: str = "") -> dict[str, Any]:
        return self.json("SecretRotate", api_pb2.SecretRequest(name=name, tenant=tenant))

    # Join tokens and users.

    def token_create(self, ttl_seconds: float) -> Any:
        return self.unary(self.cluster, "TokenCreate", api_pb2.TokenRequest(ttl_seconds=ttl_seconds))

    def token_list(self) -> list[dict[str, Any]]:
        return self.json("TokenList", api_pb2.Empty())["items"]

    def token_revoke(self, token_id: str) -> dict[str, Any]:
        return self.json("TokenRevoke", api_pb2.TokenRequest(id=token_id))

    def user_create(self, name: str, team: str = "", groups: Iterable[str] = ()) -> dict[str, Any]:
        return self.json("UserCreate", api_pb2.UserRequest(name=name, team=team, groups=list(groups)))

    def user_list(self) -> list[dict[str, Any]]:
        return self.json("UserList", api_pb2.Empty())["items"]

    def user_delete(self, name: str) -> dict[str, Any]:
        return self.json("UserDelete", api_pb2.UserRequest(name=name))

    def user_token(self, name: str, ttl_seconds: float) -> Any:
        return self.unary(self.cluster, "UserToken", api_pb2.UserRequest(name=name, ttl_seconds=ttl_seconds))

    # Streams.

    def logs(self, target: str, tenant: str = "", *, follow: bool = False, tail: int = 0,
             tags: Mapping[str, str] | None = None, since_seconds: float = 0.0, since_time: float = 0.0,
             init: bool = False) -> Iterator[Any]:
        """Chunks (`instance`, `data`) of the output of `target`'s instances (or those `tags` select)."""
        request = api_pb2.LogsRequest(target=target, tenant=tenant, follow=follow, tail=tail,
                                      tags=dict(tags or {}), since_seconds=since_seconds,
                                      since_time=since_time, init=init)
        return self.stream(self.cluster, "Logs", request)

    def exec_session(self, instance: str, command: list[str], inputs: Iterable[Any], *, tenant: str = "",
                     tty: bool = False, size: tuple[int, int] | None = None) -> Iterator[Any]:
        """Run `command` in `instance`; yields outputs (`stdout`, `stderr`, `exited`, `exit_code`).
        `inputs` gives stdin bytes, `STDIN_CLOSED`, and `(rows, cols)` resizes (see above)."""
        first = api_pb2.ExecInput(instance=instance, tenant=tenant, command=command, tty=tty)
        if size is not None:
            first.resize.CopyFrom(api_pb2.WindowSize(rows=size[0], cols=size[1]))

        def messages() -> Iterator[Any]:
            yield first
            for item in inputs:
                if item is STDIN_CLOSED:
                    yield api_pb2.ExecInput(stdin_closed=True)
                elif isinstance(item, tuple):
                    yield api_pb2.ExecInput(resize=api_pb2.WindowSize(rows=item[0], cols=item[1]))
                else:
                    yield api_pb2.ExecInput(stdin=item)

        return self.stream(self.cluster, "Exec", messages())
