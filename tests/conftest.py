import os
import sys

import matplotlib
import pytest

matplotlib.use('Agg')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))


@pytest.fixture(autouse=True)
def no_data_dir_from_the_environment(monkeypatch):
    """Tests pass data folders explicitly; a DKNN_DATA_DIR of the caller must not leak in."""
    monkeypatch.delenv('DKNN_DATA_DIR', raising=False)
