import sys
from pathlib import Path

# Test helper modules (fixture_expectations) are imported by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    # Keep the result cache of CLI runs out of the working tree and fresh for every session.
    import os
    import tempfile

    os.environ["TRAINLINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainlint-cache-")


# Hypothesis profiles. "default" is hypothesis's own defaults (the property tests keep their
# counts; under it the fuzz tests, tests/test_fuzz.py, pick 15 to 300 examples each, about half a
# minute together). "long" fuzzes, 10,000 programs per test:
# `pytest tests/test_fuzz.py --hypothesis-profile=long` (-p no:cacheprovider for a long run).
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("default", max_examples=100)
settings.register_profile(
    "long", max_examples=10_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
settings.load_profile("default")  # --hypothesis-profile=NAME loads another after this
