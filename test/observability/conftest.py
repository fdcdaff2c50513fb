"""The integration tests' helpers (test/integration/conftest.py: the real binary, the demo's
PKI, Server, wait_for, curl), loaded under another module name so that this directory's
tests use the same fixtures."""

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("integration_support", _path)
integration_support = importlib.util.module_from_spec(_spec)
sys.modules["integration_support"] = integration_support
_spec.loader.exec_module(integration_support)

# Fixtures pytest finds here.
binary = integration_support.binary
pki = integration_support.pki
make_server = integration_support.make_server
closed_port = integration_support.closed_port
