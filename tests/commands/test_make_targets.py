"""Make targets that loop over trained runs say which they skipped and fail when they
measured nothing, rather than exit 0 with no result."""
import os
import shutil
import subprocess
import time

import pytest

from cli_helpers import ROOT


def test_a_results_target_with_no_run_trained_fails_and_names_them(tmp_path):
    target, runs = 'plausibility-results', ('stsa.binary_cnn', 'stsa.binary_bilstm',
                                            'stsa.binary_minilm')
    if not shutil.which('make'):
        pytest.skip('make is not installed')
    for name in ('Makefile', 'requirements.txt', 'requirements-model.txt', 'pyproject.toml'):
        shutil.copyfile(os.path.join(ROOT, name), str(tmp_path / name))
    (tmp_path / '.venv').mkdir()
    time.sleep(0.01)
    (tmp_path / '.venv' / 'installed').write_text('')       # the venv counts as made
    done = subprocess.run(['make', '-s', target], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    for run in runs:
        assert 'skipped {}: not trained'.format(run) in done.stderr
    assert 'nothing measured' in done.stderr
