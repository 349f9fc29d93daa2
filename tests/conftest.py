import os
import sys

import matplotlib
import pytest

matplotlib.use('Agg')
# The checkout (the root commands) and tests/ (cli_helpers, shared by every folder's tests).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Tests pass data folders explicitly; the caller's DKNN_DATA_DIR must not leak in
# (cleared at import so module-scoped fixtures do not see it either).
os.environ.pop('DKNN_DATA_DIR', None)


@pytest.fixture
def any_run_path(monkeypatch):
    """--model-setup (and --template) take any path: for tests that fake the loaded run."""
    from deepknn import cli
    monkeypatch.setattr(cli, 'model_setup_path', str)
