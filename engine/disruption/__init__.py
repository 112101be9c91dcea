"""Voluntary disruptions: the shared availability budget, drains and rebalancing moves."""
