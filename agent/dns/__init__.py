"""The node-local resolver: answers the cluster's names (`derived/dns/` in the node's slice) on
the container bridge's gateway address, port 53, and forwards every other name to the host's
resolvers (docs/agent.md, "DNS")."""
