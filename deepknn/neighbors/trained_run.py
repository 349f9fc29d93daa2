"""Loading a trained run for an analysis: its setup, checked first, then its DkNN.

    setup, dknn = runs.load_run('results/stsa.binary_cnn', DkNNSettings(k=75))

The analyses (reports/paper_analyses.py, faithfulness, plausibility, Feng's measures)
take the loaded setup and DkNN as plain values; the command lines find the folder.
"""
import os

from deepknn.evaluation import calibration
from deepknn.neighbors import dknn as dknn_lib
from deepknn.models import model_setup


def load_run(folder, settings, needs_temperature=False, check=None):
    """(setup, calibrated DkNN of dknn_settings.DkNNSettings `settings`) of the trained
    run in result folder `folder`. A missing temperature.json (when `needs_temperature`)
    or a model that `check(setup)` refuses (by raising a UserError) is reported before
    the slow DkNN build."""
    setup = model_setup.load_setup(os.path.join(folder, 'args.json'))
    if check is not None:
        check(setup)
    if needs_temperature:
        calibration.load_temperature(setup.result_dir)
    return setup, dknn_lib.dknn_from_setup(setup, settings)
