"""One availability budget for every voluntary disruption: rollout, drain, rebalancing, resize.

A service keeps at least `floor` ready instances. Kubernetes' PodDisruptionBudget is the model:
`disruption.min_available`, or `instances - disruption.max_unavailable`; without a disruption
block the update's `max_unavailable` (default 1) bounds it.
"""

from ccattler.engine.facts import service_doc


def floor(service: dict) -> int:
    """Ready instances the service must keep through any voluntary disruption."""
    instances = service.get("instances")
    if not isinstance(instances, int) or instances <= 0:
        return 0
    disruption = service_doc.disruption(service)
    if disruption.get("min_available") is not None:
        return min(instances, disruption["min_available"])
    if disruption.get("max_unavailable") is not None:
        return max(0, instances - disruption["max_unavailable"])
    update = service_doc.update(service)
    return max(0, instances - update.get("max_unavailable", 1))


def disruptions_allowed(service: dict, ready: int) -> int:
    """How many more ready instances may be taken down now without breaking the floor."""
    return max(0, ready - floor(service))
