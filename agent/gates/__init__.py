"""Gates: HTTP routing by host and path to a service's ready backends, through one HAProxy per node.

`model` reads the gates and their backends out of the node's slice, `config` renders HAProxy's
configuration, `slots` keeps each backend's server slots and the runtime-API commands that move
them, `runtime_api` talks to HAProxy's stats socket, `process` starts, reloads and stops the
master-worker process, and `manager.Gates` ties them together for `NodeCore`.
"""
