"""Trust scorers that read only the logits: max softmax, temperature-scaled max softmax
and energy (registered in deepknn.shift.base.SCORERS).

  msp          max_j softmax(z)_j (Hendrycks & Gimpel 2017)
  temperature  max_j softmax(z / T)_j, T fitted on the calibration split by NLL (Guo et al.
               2017); T changes the scores' spread but never their order within a batch
  energy       T * logsumexp(z / T), the negative free energy (Liu et al. 2020), T = 1
"""
import numpy as np
from scipy.special import logsumexp

from deepknn.evaluation import calibration
from deepknn.shift.base import Scorer
from nlp_utils import UserError


class MaxSoftmax(Scorer):
    """The largest softmax probability of the logits."""
    name = 'msp'
    description = 'maximum softmax probability of the logits (Hendrycks & Gimpel 2017)'
    temperature = 1.0

    def _score(self, batch):
        return calibration.softmax(batch.logits, self.temperature).max(axis=1)


class TemperatureSoftmax(MaxSoftmax):
    """The largest softmax probability of logits / T, T fitted on the calibration split
    (deepknn.evaluation.calibration.fit_temperature); the fitted T is `temperature`."""
    name = 'temperature'
    description = ('maximum softmax probability after temperature scaling fitted on the '
                   'calibration split (Guo et al. 2017)')

    def _fit(self, train, train_labels, calib, calib_labels):
        self.temperature = calibration.fit_temperature(calib.logits, calib_labels)


class Energy(Scorer):
    """T * logsumexp(logits / T): minus Liu et al.'s (2020) energy, so that higher is more
    in-distribution. T = `temperature` (1 in the paper's detector)."""
    name = 'energy'
    description = 'negative energy T * logsumexp(logits / T), T = 1 (Liu et al. 2020)'

    def __init__(self, temperature=1.0):
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                or not 0 < temperature < np.inf:
            raise UserError('`temperature` must be a positive number, got {!r}'.format(
                temperature), parameter='temperature')
        self.temperature = float(temperature)

    def _score(self, batch):
        logits = np.asarray(batch.logits, dtype=np.float64)
        return self.temperature * logsumexp(logits / self.temperature, axis=1)
