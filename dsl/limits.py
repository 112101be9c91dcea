"""The largest request the cluster takes: one table, read by the compiler (so `cca lint` reports
exactly what apply enforces), the template renderer, the API's request checks and the docs.

Each maximum is far above real use and far below what would exhaust a server: a quantity past
it is refused with an error naming the limit, never clamped.
"""

from __future__ import annotations

#: Source files in one apply/diff/delete/lint.
MAX_SOURCES = 1_000
#: Bytes of one source file (after rendering).
MAX_SOURCE_BYTES = 4 * 1024 * 1024
#: Files read with `from "path"` sent with one request.
MAX_FROM_FILES = 1_000
#: Documents (services, volumes, grants, …) one apply may declare.
MAX_OBJECTS = 10_000
#: Services one apply may declare.
MAX_SERVICES = 5_000
#: `instances N` of one service (and of a group).
MAX_INSTANCES = 10_000
#: Characters a template may render to, and the largest string/list a template expression builds.
MAX_TEMPLATE_OUTPUT = 4 * 1024 * 1024
#: Instances a tenant may run when its `tenant` block sets no quota (`cca describe tenant`).
DEFAULT_TENANT_INSTANCES = 10_000
