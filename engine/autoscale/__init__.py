"""Autoscaling: the HPA's replica calculator (calc), one horizontal decision (horizontal), the
vertical recommender (vertical) and the offline replay of a timeline (replay)."""
