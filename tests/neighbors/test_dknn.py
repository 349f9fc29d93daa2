"""DkNN on hand-made activations, where neighbours and scores are known by hand."""
import numpy as np
import pytest

from nlp_utils import UserError
from deepknn.neighbors.dknn import DkNN

# One layer on a line: class 0 at 0, 1, 2 and class 1 at 10, 11, 12.
TRAIN = np.array([[0.], [1.], [2.], [10.], [11.], [12.]], dtype=np.float32)
LABELS = np.array([0, 0, 0, 1, 1, 1])
# Calibration nonconformity at the true label: x=1 (0) -> 0, x=11 (1) -> 0,
# x=2.5 labelled 1 -> its neighbours 2, 1, 0 are all class 0 -> 3.
CALIB = np.array([[1.], [11.], [2.5]], dtype=np.float32)
CALIB_LABELS = np.array([0, 1, 1])


def fitted(backend='kdtree', layers=1, **kwargs):
    dknn = DkNN(2, backend=backend, k=3, **kwargs)
    dknn.fit([TRAIN] * layers, LABELS)
    return dknn.calibrate([CALIB] * layers, CALIB_LABELS)


@pytest.mark.parametrize('backend', ['kdtree', 'faiss'])
def test_hand_computed_scores(backend):
    dknn = fitted(backend)
    np.testing.assert_array_equal(dknn.calibration_scores, [0, 0, 3])
    result = dknn.predict_from_activations([np.array([[0.5], [6.9]], dtype=np.float32)])
    # x=0.5: neighbours 0, 1, 2 (all class 0): nonconformity [0, 3] -> p = [1, 1/3].
    # x=6.9: neighbours 10, 11 (class 1) and 2 (class 0): nonconformity [2, 1] -> p = [1/3, 1/3].
    np.testing.assert_array_equal(result['neighbor_labels'][:, 0], [[0, 0, 0], [1, 1, 0]])
    np.testing.assert_allclose(result['p_values'], [[1, 1 / 3], [1 / 3, 1 / 3]])
    np.testing.assert_allclose(result['conformity'], [[1, 0], [1 / 3, 2 / 3]])
    # The tie in p-values at x=6.9 goes to the class with the larger conformity.
    np.testing.assert_array_equal(result['prediction'], [0, 1])
    np.testing.assert_allclose(result['credibility'], [1, 1 / 3])
    np.testing.assert_allclose(result['confidence'], [2 / 3, 2 / 3])


def test_full_tie_goes_to_smaller_class_id():
    dknn = DkNN(2, k=2).fit([np.array([[0.], [2.]], np.float32)], [1, 0])
    dknn.calibrate([np.array([[0.], [2.]], np.float32)], [1, 0])
    result = dknn.predict_from_activations([np.array([[1.]], np.float32)])
    np.testing.assert_allclose(result['conformity'], [[0.5, 0.5]])
    assert result['prediction'].tolist() == [0]


def test_nonconformity_sums_over_layers_and_last_layer_only():
    # Layer 2 puts the query among class 1; layer 1 among class 0.
    second_layer = np.array([[10.], [11.], [12.], [0.], [1.], [2.]], dtype=np.float32)
    dknn = DkNN(2, k=3)
    dknn.fit([TRAIN, second_layer], LABELS)
    labels = dknn.neighbor_labels([np.array([[0.5]], np.float32)] * 2)
    assert labels.shape == (1, 2, 3)
    np.testing.assert_array_equal(dknn.nonconformity(labels), [[3, 3]])
    last_only = DkNN(2, k=3, last_layer_only=True).fit([TRAIN, second_layer], LABELS)
    labels = last_only.neighbor_labels([np.array([[0.5]], np.float32)] * 2)
    np.testing.assert_array_equal(last_only.nonconformity(labels), [[3, 0]])


def test_missing_neighbours_disagree_with_every_class():
    dknn = DkNN(3, k=2)
    np.testing.assert_array_equal(dknn.nonconformity(np.array([[[0, -1]]])), [[1, 2, 2]])


def test_p_values_count_ties_as_at_least_as_nonconforming():
    dknn = DkNN(2, k=3)
    dknn.calibration_scores = np.array([0, 1, 1, 4])
    np.testing.assert_allclose(dknn.p_values(np.array([[1, 5], [0, 4]])), [[0.75, 0], [1, 0.25]])


def test_two_layers_agree_with_one_layer_counted_twice():
    one, two = fitted(layers=1), fitted(layers=2)
    query = [np.array([[0.5], [6.9], [11.5]], np.float32)]
    np.testing.assert_array_equal(one.predict_from_activations(query)['prediction'],
                                  two.predict_from_activations(query * 2)['prediction'])
    np.testing.assert_array_equal(two.calibration_scores, [0, 0, 6])


def test_backends_agree_on_random_clusters():
    rng = np.random.RandomState(0)
    centers = rng.normal(0, 5, (3, 8))
    labels = rng.randint(0, 3, 600)
    train = [(centers[labels] + rng.normal(0, 2, (600, 8))).astype(np.float32) for _ in range(2)]
    calib_labels = rng.randint(0, 3, 100)
    calib = [(centers[calib_labels] + rng.normal(0, 2, (100, 8))).astype(np.float32)] * 2
    queries = [(centers[rng.randint(0, 3, 200)] + rng.normal(0, 2, (200, 8))).astype(np.float32)] * 2
    results = {}
    for backend in ('kdtree', 'faiss'):
        dknn = DkNN(3, backend=backend, k=10).fit(train, labels).calibrate(calib, calib_labels)
        results[backend] = dknn.predict_from_activations(queries)
    for key in ('prediction', 'p_values', 'neighbor_labels'):
        np.testing.assert_array_equal(results['kdtree'][key], results['faiss'][key])


def test_bad_inputs():
    with pytest.raises(UserError, match='k=7 is larger than the 6 training examples'):
        DkNN(2, k=7).fit([TRAIN], LABELS)
    dknn = DkNN(2, k=3).fit([TRAIN], LABELS)
    with pytest.raises(UserError, match='calibration split is empty'):
        dknn.calibrate([TRAIN[:0]], [])
    with pytest.raises(UserError, match='holds only class 1'):
        dknn.calibrate([TRAIN[:2]], [1, 1])


def test_nan_activations_are_refused_with_the_layer_named():
    from deepknn.neighbors.dknn import checked_activations
    good = np.zeros((2, 3), np.float32)
    assert checked_activations([good], 'test')[0] is good
    with pytest.raises(UserError, match='test activations of layer 1 contain NaN'):
        checked_activations([good, np.array([[0, np.nan]], np.float32)], 'test')


def test_calibration_scores_are_taken_at_each_examples_true_label():
    # Rows of nonconformity [class 0, class 1]: x=1 -> [0, 3], x=11 -> [3, 0],
    # x=12 -> [3, 0], x=2.5 -> [0, 3]. At the true labels 0, 1, 1, 1: [0, 0, 0, 3];
    # taken at a fixed class it would be [0, 0, 3, 3] (class 0 or class 1 alike).
    dknn = DkNN(2, k=3).fit([TRAIN], LABELS)
    dknn.calibrate([np.array([[1.], [11.], [12.], [2.5]], np.float32)], [0, 1, 1, 1])
    np.testing.assert_array_equal(dknn.calibration_scores, [0, 0, 0, 3])
    # x=6.9 has nonconformity [2, 1]: one calibration score of 4 is >= 2 and >= 1.
    result = dknn.predict_from_activations([np.array([[6.9]], np.float32)])
    np.testing.assert_allclose(result['p_values'], [[0.25, 0.25]])


def test_last_layer_only_searches_the_last_layer_with_the_last_layers_query():
    # In the second layer the classes swap sides. The first-layer query (11) and the
    # second-layer query (0.5) disagree, so pairing the wrong ones shows.
    second_layer = np.array([[10.], [11.], [12.], [0.], [1.], [2.]], dtype=np.float32)
    dknn = DkNN(2, k=3, last_layer_only=True).fit([TRAIN, second_layer], LABELS)
    query = [np.array([[11.]], np.float32), np.array([[0.5]], np.float32)]
    labels = dknn.neighbor_labels(query)
    assert labels.shape == (1, 1, 3)
    np.testing.assert_array_equal(labels, [[[1, 1, 1]]])
    dknn.calibrate([CALIB, CALIB], CALIB_LABELS)
    assert dknn.predict_from_activations(query)['prediction'].tolist() == [1]


def test_a_different_number_of_layers_is_an_error():
    dknn = DkNN(2, k=3).fit([TRAIN, TRAIN], LABELS)
    with pytest.raises(UserError, match='query activations have 1 layers, but the DkNN was '
                                        'fitted on 2'):
        dknn.neighbor_labels([TRAIN])
    with pytest.raises(UserError, match='calibration|query activations have 3 layers'):
        dknn.calibrate([CALIB] * 3, CALIB_LABELS)


def test_neighbours_and_distances_are_returned_nearest_first():
    dknn = fitted('faiss', layers=2)
    result = dknn.predict_from_activations([np.array([[0.4]], np.float32)] * 2)
    np.testing.assert_array_equal(result['neighbors'], [[[0, 1, 2], [0, 1, 2]]])
    np.testing.assert_allclose(result['neighbor_distances'][0, 0], [0.4, 0.6, 1.6], rtol=1e-5)


@pytest.mark.parametrize('backend', ['faiss', 'kdtree'])
def test_save_and_load_give_the_same_predictions(backend, tmp_path):
    dknn = fitted(backend, layers=2, last_layer_only=backend == 'kdtree')
    path = str(tmp_path / 'dknn.npz')
    dknn.save(path)
    with np.load(path, allow_pickle=False) as saved:   # plain arrays only
        assert ('index_0_faiss_index' in saved.files) == (backend == 'faiss')
    loaded = DkNN.load(path)
    query = [np.array([[0.5], [6.9], [11.5]], np.float32)] * 2
    for key, value in dknn.predict_from_activations(query).items():
        np.testing.assert_array_equal(loaded.predict_from_activations(query)[key], value)
    assert (loaded.k, loaded.backend, loaded.last_layer_only) == (3, backend, backend == 'kdtree')


def test_loading_something_else_is_a_one_line_error(tmp_path):
    path = tmp_path / 'other.npz'
    np.savez(str(path), weights=np.zeros(3))
    with pytest.raises(UserError, match='is not a DkNN saved by DkNN.save'):
        DkNN.load(str(path))


def test_random_bytes_are_not_called_pickled_data(tmp_path):
    path = tmp_path / 'dknn.npz'
    path.write_bytes(np.random.RandomState(0).bytes(500))
    with pytest.raises(UserError) as error:
        DkNN.load(str(path))
    assert 'not an npz file' in str(error.value) and 'pickle' not in str(error.value)


def test_training_labels_outside_the_classes_are_refused():
    with pytest.raises(UserError, match=r'train_labels must lie in \[0, 2\) .*got \[0, 2\]'):
        DkNN(2, k=3).fit([TRAIN], [0, 0, 0, 1, 1, 2])


def fit_only():
    return DkNN(2, k=3).fit([TRAIN], LABELS)


@pytest.mark.parametrize('call, message', [
    (lambda: fit_only().calibrate([TRAIN[:2]], [0, -1]), r'calib_labels must lie in \[0, 2\)'),
    (lambda: fit_only().calibrate([TRAIN[:2]], [0, 2]), r'calib_labels must lie in \[0, 2\)'),
    (lambda: fit_only().calibrate([TRAIN[:3]], [0, 1]), 'one label per activation row \\(3\\)'),
    (lambda: fit_only().calibrate([TRAIN[:2]], [0.0, 1.0]), 'integer class ids, got float64'),
    (lambda: fit_only().calibrate([np.zeros((2, 3))], [0, 1]), 'layer 0 has width 3, but .* width 1'),
    (lambda: fit_only().calibrate([np.zeros((0, 2))], []), 'calibration split is empty'),
    (lambda: fit_only().predict_from_activations([TRAIN[:2]]), 'not calibrated'),
    (lambda: DkNN(2, k=3).fit([], []), 'train_activations holds no layer'),
    (lambda: DkNN(2, k=3).fit([np.zeros((0, 2))], []), 'train_activations has no rows'),
    (lambda: DkNN(2, k=3).fit([TRAIN, TRAIN[:5]], [0, 0, 0, 1, 1, 1]), 'one row per input'),
    (lambda: DkNN(2, k=3).fit([TRAIN * np.nan], [0, 0, 0, 1, 1, 1]), 'layer 0 contains NaN'),
    (lambda: DkNN(2, k=0), 'k must be an integer >= 1, got 0'),
    (lambda: DkNN(1, k=3), 'n_class must be an integer >= 2'),
])
def test_every_array_entering_the_dknn_is_checked(call, message):
    """Labels out of range, more rows than labels, float labels, wrong widths, empty or
    non-finite arrays: one UserError naming the argument, never a plausible report."""
    with pytest.raises(UserError, match=message):
        call()
