"""Test configuration: hypothesis is deterministic under CI, so a run is reproducible."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
if os.environ.get("CI"):
    settings.load_profile("ci")
