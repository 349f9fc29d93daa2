"""What is read off a saliency map: normalised importances, highlighted words and
importance ranks (section 5.1). Maps are normalised so that maps of different methods
compare: by default each importance is divided by the sentence's total absolute
importance, as section 5.1 states; 'per-sign' and 'half-scale' (the authors' code) are
the alternatives."""
import numpy as np
from scipy import stats

HIGHLIGHT_THRESHOLD = 0.05   # section 5.1: "a light blue or light red highlight"
# How a map's importances are scaled so that maps of different methods compare.
NORMALIZATIONS = {
    'total': "each word's importance / the sentence's total absolute importance "
             "(the paper's section 5.1 wording)",
    'per-sign': 'positive importances / their sum, negative ones / the sum of their '
                'magnitudes',
    'half-scale': "per-sign / 2, the authors' code (a colour scale centred at 0.5)",
}
DEFAULT_NORMALIZATION = 'total'


def normalize(scores, normalization=DEFAULT_NORMALIZATION):
    """Scale one map's importances (n,) -> (n,) float64, signs kept (NORMALIZATIONS):

    'total'       s_i / sum_j |s_j|, so the magnitudes sum to 1;
    'per-sign'    s_i / sum of the importances with the sign of s_i, so each sign's
                  magnitudes sum to 1;
    'half-scale'  per-sign / 2, in [-0.5, 0.5].
    NaN stays NaN and is left out of the sums; an all-zero map stays zero.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError('unknown normalization {!r}; choose from {}'.format(
            normalization, ', '.join(NORMALIZATIONS)))
    scores = np.asarray(scores, dtype=np.float64)
    normalized = scores.copy()
    if normalization == 'total':
        total = np.abs(scores[~np.isnan(scores)]).sum()
        return normalized / total if total > 0 else normalized
    positive, negative = scores > 0, scores < 0   # NaN is neither
    if positive.any():
        normalized[positive] /= scores[positive].sum()
    if negative.any():
        normalized[negative] /= -scores[negative].sum()
    return normalized / 2 if normalization == 'half-scale' else normalized


def highlighted(scores, threshold=HIGHLIGHT_THRESHOLD, normalization=DEFAULT_NORMALIZATION):
    """Boolean (n,): |normalised importance| > threshold (NaN is never highlighted)."""
    with np.errstate(invalid='ignore'):
        return np.abs(normalize(scores, normalization)) > threshold


def importance_ranks(scores, most_positive_first=False):
    """Rank of each token (n,) float: 1 = the most negative (section 5.1), or with
    most_positive_first=True 1 = the most positive, i.e. most important (Table 4).
    Tied tokens share the average of their ranks; NaN scores get rank NaN and the
    others are ranked among themselves."""
    scores = np.asarray(scores, dtype=np.float64)
    ranks = np.full(scores.shape, np.nan)
    finite = ~np.isnan(scores)
    ordered = -scores[finite] if most_positive_first else scores[finite]
    ranks[finite] = stats.rankdata(ordered, method='average')
    return ranks
