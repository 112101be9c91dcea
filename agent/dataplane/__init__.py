"""A node's kernel data plane behind one small interface (`base.DataPlane`): service VIPs and
external ports load-balanced to ready backends, and identity-based policy into local instances.

Implementations: `memory` (unit tests), `nftables` (the default), `ebpf` (`--dataplane ebpf`). They
take the same desired state (`base.DataPlaneState`, built by the agent from its slice's
`derived/vip/`, `derived/endpoint/` and `derived/firewall/<node>` documents) and reconcile the
kernel to it: each `apply` diffs against what is programmed and changes only that, atomically.
"""
