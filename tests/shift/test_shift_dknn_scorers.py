"""DkNN trust scorers (deepknn/shift/dknn_scorers.py): the same numbers as a DkNN built by
hand, and a layer subset chosen on half the calibration split that finds the one
informative layer among noise layers."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from deepknn.neighbors.dknn import DkNN
from deepknn.shift.scorers import SCORERS, Outputs
from nlp_utils import UserError

K = 15


def noisy_layers(seed, n, separation=1.0):
    """Outputs of 5 layers (noise, informative, noise, noise, logits of noise) and labels
    (n,): only layer 1 carries the class, as -1 / +1 (times `separation`) plus N(0, 1)
    noise. The last layer is the logits, as in the project's models."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    informative = np.c_[separation * (2 * labels - 1) + rng.normal(0, 1, n),
                        rng.normal(0, 1, (n, 2))]
    noise = [rng.normal(0, 1, (n, 4)) for _ in range(3)]
    logits = rng.normal(0, 1, (n, 2)).astype(np.float32)
    layers = [noise[0], informative, noise[1], noise[2]]
    return Outputs.from_layers([l.astype(np.float32) for l in layers] + [logits]), labels


TRAIN, TRAIN_LABELS = noisy_layers(0, 400)
CALIB, CALIB_LABELS = noisy_layers(1, 300)
TEST, _ = noisy_layers(2, 100)


def by_hand(layers_of, train=TRAIN, calib=CALIB, test=TEST):
    """predict_from_activations of a DkNN on layers_of(outputs), fitted on train and
    calibrated on calib, for test."""
    dknn = DkNN(2, backend='kdtree', k=K).fit(layers_of(train), TRAIN_LABELS)
    return dknn.calibrate(layers_of(calib), CALIB_LABELS).predict_from_activations(
        layers_of(test))


def fitted(name, **options):
    return SCORERS[name](k=K, **options).fit(TRAIN, TRAIN_LABELS, CALIB, CALIB_LABELS)


def test_credibility_and_confidence_are_the_dknns():
    expected = by_hand(lambda outputs: outputs.layers)
    credibility = fitted('dknn-credibility')
    np.testing.assert_array_equal(credibility.score(TEST), expected['credibility'])
    np.testing.assert_array_equal(credibility.dknn_result(TEST)['prediction'],
                                  expected['prediction'])
    np.testing.assert_array_equal(fitted('dknn-confidence').score(TEST),
                                  expected['confidence'])
    assert credibility.score(TEST).dtype == np.float64


def test_normalised_dknn_searches_unit_rows():
    def unit(outputs):
        return [(l / np.linalg.norm(l, axis=1, keepdims=True)).astype(np.float32)
                for l in outputs.layers]
    np.testing.assert_array_equal(fitted('dknn-normalized').score(TEST),
                                  by_hand(unit)['credibility'])


@pytest.mark.parametrize('layer', [0, 1, -2, -1])
def test_single_layer_dknn(layer):
    scorer = fitted('dknn-layer', layer=layer)
    assert scorer.layer_index == layer % 5
    np.testing.assert_array_equal(
        scorer.score(TEST), by_hand(lambda outputs: [outputs.layers[layer]])['credibility'])


@pytest.mark.parametrize('exhaustive_up_to', [6, 0])      # every subset; greedy forward
def test_selection_finds_the_informative_layer(exhaustive_up_to):
    scorer = fitted('dknn-selected', exhaustive_up_to=exhaustive_up_to)
    assert scorer.chosen_layers == (1,)
    assert np.argmax(scorer.layer_aurocs) == 1 and len(scorer.layer_aurocs) == 5
    assert len(scorer.subset_aurocs) == (31 if exhaustive_up_to else 5 + 4)
    # Finally calibrated on the whole calibration split.
    np.testing.assert_array_equal(
        scorer.score(TEST), by_hand(lambda outputs: [outputs.layers[1]])['credibility'])


def test_selection_scores_half_b_with_a_dknn_calibrated_on_half_a():
    scorer = fitted('dknn-selected', seed=7)
    a, b = scorer.halves
    assert len(a) == 150 and len(b) == 150 and not set(a) & set(b)
    for subset in [(0,), (1,), (4,), (0, 1), (1, 2, 4)]:
        dknn = DkNN(2, backend='kdtree', k=K).fit([TRAIN.layers[l] for l in subset],
                                                  TRAIN_LABELS)
        dknn.calibrate([CALIB.layers[l][a] for l in subset], CALIB_LABELS[a])
        result = dknn.predict_from_activations([CALIB.layers[l][b] for l in subset])
        expected = roc_auc_score(result['prediction'] == CALIB_LABELS[b],
                                 result['credibility'])
        assert scorer.subset_aurocs[subset] == pytest.approx(expected, abs=1e-12)
    assert scorer.layer_aurocs[4] == scorer.subset_aurocs[(4,)]


def test_selection_keeps_every_layer_when_no_auroc_is_defined():
    # Far-apart classes in every layer: every DkNN prediction on half B is right.
    train, train_labels = noisy_layers(0, 400, separation=20)
    calib, calib_labels = noisy_layers(1, 300, separation=20)
    train, calib = (Outputs(outputs.logits, [outputs.layers[1]] * 5)
                    for outputs in (train, calib))
    scorer = SCORERS['dknn-selected'](k=K).fit(train, train_labels, calib, calib_labels)
    assert np.all(np.isnan(scorer.layer_aurocs))
    assert scorer.chosen_layers == (0, 1, 2, 3, 4)


def test_errors_name_the_parameter():
    with pytest.raises(UserError, match='choose a smaller `k`'):
        SCORERS['dknn-credibility'](k=401).fit(TRAIN, TRAIN_LABELS, CALIB, CALIB_LABELS)
    with pytest.raises(UserError, match='`k` must be an integer >= 1'):
        SCORERS['dknn-selected'](k=0)
    with pytest.raises(UserError, match='`layer` must index one of the 5 layers'):
        SCORERS['dknn-layer'](layer=-6, k=K).fit(TRAIN, TRAIN_LABELS, CALIB, CALIB_LABELS)
    with pytest.raises(UserError, match='`exhaustive_up_to` must be an integer >= 0'):
        SCORERS['dknn-selected'](exhaustive_up_to=-1)
    with pytest.raises(UserError, match='call fit'):
        SCORERS['dknn-credibility']().dknn_result(TEST)
