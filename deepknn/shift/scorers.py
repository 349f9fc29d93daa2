"""Every trust scorer, registered: SCORERS maps a name to its class (import this module,
not the ones defining the scorers, to be sure the registry is complete).

    from deepknn.shift.scorers import SCORERS, Outputs
    scorer = SCORERS['knn-sun'](k=50, layer=-2).fit(train, train_labels, calib, calib_labels)

The scorers, in registry order: msp, temperature, energy (logit_scorers.py);
mahalanobis, relative-mahalanobis, knn-sun (feature_scorers.py); dknn-credibility,
dknn-confidence, dknn-normalized, dknn-layer, dknn-selected (dknn_scorers.py).
"""
# Imported in this order so that the registry lists the scorers in the order above.
from deepknn.shift import logit_scorers  # noqa: F401 (registers its scorers)
from deepknn.shift import feature_scorers  # noqa: F401,I100
from deepknn.shift import dknn_scorers  # noqa: F401,I100
from deepknn.shift.base import SCORERS, Outputs, Scorer  # noqa: F401 (the interface)
