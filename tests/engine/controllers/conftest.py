"""Makes `controller_builders` (next to this file) importable from the tests here."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
