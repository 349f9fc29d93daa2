"""Every training-data attribution method, registered: METHODS maps a name to its class
(import this module, not the ones defining the methods, to be sure the registry is complete).

    from deepknn.attribution.methods import METHODS, Representations
    method = METHODS['tracin-last']().fit(train)
    scores = method.scores(test)              # (n_test, n_train), higher = more supportive
"""
from deepknn.attribution import neighbors, representer, tracin, trak   # noqa: F401 (registers)
from deepknn.attribution.base import (  # noqa: F401 (the interface)
    METHODS, Attribution, Checkpoint, Representations)
