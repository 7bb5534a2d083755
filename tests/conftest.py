import sys
from pathlib import Path

# Test helper modules (fixture_expectations) are imported by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    # Keep the result cache of CLI runs out of the working tree and fresh for every session.
    import os
    import tempfile

    os.environ["TRAINLINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainlint-cache-")
