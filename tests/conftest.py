import sys
from pathlib import Path

# Test helper modules (fixture_expectations) are imported by name.
sys.path.insert(0, str(Path(__file__).resolve().parent))
