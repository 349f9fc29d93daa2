"""Attribution from DkNN layers alone equals the methods fitted on full Representations."""
import numpy as np
import pytest

from deepknn.attribution.from_layers import FROM_LAYERS, LayerAttribution
from deepknn.attribution.methods import METHODS, Representations
from nlp_utils import UserError
from tests.attribution.attribution_cases import random_representations


@pytest.mark.parametrize('name', list(FROM_LAYERS))
def test_layer_attribution_equals_the_method_on_the_same_arrays(name):
    train, test = random_representations(30, seed=1), random_representations(5, seed=2)
    explainer = LayerAttribution(name, train.layers, train.labels, k=4)
    ids, scores = explainer.top(test.layers, test.labels, 3)
    method, options = FROM_LAYERS[name]
    options = dict(options, k=4) if method == 'dknn-vote' else options
    wrap = (lambda r: Representations(r.labels, r.final, r.layers, [r.final])) \
        if method == 'tracin-last' else (lambda r: r)
    fitted = METHODS[method](**options).fit(wrap(Representations.from_layers(
        train.layers, train.labels)))
    expected_ids, expected = fitted.top(wrap(Representations.from_layers(
        test.layers, test.labels)), 3)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(scores, expected)


def test_grad_cos_from_layers_is_the_cosine_of_last_layer_gradients():
    train, test = random_representations(12, seed=3), random_representations(2, seed=4)
    _, scores = LayerAttribution('grad-cos', train.layers, train.labels).top(
        test.layers, test.labels, 12)
    def gradient(features, probabilities, label):
        residual = probabilities.copy()
        residual[label] -= 1
        return np.outer(residual, np.r_[features, 1.0]).ravel()
    final_train = Representations.from_layers(train.layers, train.labels).final
    final_test = Representations.from_layers(test.layers, test.labels).final
    for t in range(2):
        g_t = gradient(final_test.features[t].astype(float), final_test.probabilities[t],
                       test.labels[t])
        cosines = [g_t @ g / np.linalg.norm(g_t) / np.linalg.norm(g) for g in (
            gradient(final_train.features[i].astype(float), final_train.probabilities[i],
                     train.labels[i]) for i in range(12))]
        np.testing.assert_allclose(scores[t], np.sort(cosines)[::-1], rtol=1e-6, atol=1e-9)


def test_an_unknown_method_names_the_parameter():
    train = random_representations(5, seed=0)
    with pytest.raises(UserError, match='`attribution` must be one of grad-cos'):
        LayerAttribution('trak', train.layers, train.labels)
