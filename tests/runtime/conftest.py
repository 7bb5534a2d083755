import pytest

# The runtime guard needs torch (an optional extra); the static tests do not.
pytest.importorskip("torch", reason="the runtime guard tests need torch (pip install 'torch==2.13.0')")
