"""Trust scores of any inputs beside DkNN credibility: the shift study's scorers fitted on
a run's training and calibration splits, then read off the inputs' layers.

    fitted = fitted_trust(setup, settings, ('relative-mahalanobis',))
    scores = trust_scores(fitted, layers)          # {name: (n,)}, higher = more trusted
"""
import inspect

from deepknn.shift import study
from deepknn.shift.scorers import SCORERS, Outputs

# What predict.py and the explorer show beside credibility unless told otherwise: the
# study's one clear winner, Mahalanobis distance on the penultimate layer, which told
# other-task inputs (TREC) from SST-2 test best for MiniLM in all three runs (AUROC 0.992
# vs 0.913 for max softmax and 0.858 for credibility). For right vs wrong no scorer beat
# max softmax and credibility, which already show (results/README.md, "Trust under shift").
DEFAULT_TRUST = ('mahalanobis',)


def _spec(name, settings):
    """The ScorerSpec of a registered scorer with the run's DkNN settings where it takes
    them: a DkNN scorer the DkNN's k and backend, the others their own k (Sun et al.'s 50)
    and the backend."""
    accepted = inspect.signature(SCORERS[name].__init__).parameters
    options = {}
    if 'backend' in accepted:
        options['backend'] = settings.backend
    if 'k' in accepted and name.startswith('dknn'):
        options['k'] = settings.k
    return study.ScorerSpec(name, name, tuple(sorted(options.items())))


def fitted_trust(setup, settings, names):
    """{name: scorer} of registered scorer names, fitted on the run's splits (DkNNSettings
    `settings`: its k, backend and batchsize)."""
    if not names:
        return {}
    fitted, _, _ = study.fit_scorers([_spec(name, settings) for name in names], setup,
                                     settings)
    return fitted


def trust_scores(fitted, layers):
    """{name: (n,) float64} of the inputs whose DkNN layers are `layers` (list of (n, D_l),
    the last the logits)."""
    outputs = Outputs.from_layers(layers)
    return {name: scorer.score(outputs) for name, scorer in fitted.items()}
