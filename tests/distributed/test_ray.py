"""The Ray engine (docs/ray.md) on a local Ray with 2 CPUs, started once for this module:
the sharded exact path gives the one-process DkNN's answers, IVF shards keep one IVF
index's recall, a worker killed mid-extraction is resumed without counting a row twice,
and a missing or corrupt shard is a one-line error."""
import os
import sys

import numpy as np
import pytest

ray = pytest.importorskip('ray')

import cli_helpers  # noqa: E402
import run_dknn  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.neighbors import knn_index
from deepknn.models import model_setup
from deepknn.neighbors import neighbor_rule  # noqa: E402
from deepknn.distributed import activations, search, shards  # noqa: E402
from deepknn.distributed.engine import RayEngine  # noqa: E402
from deepknn.neighbors.dknn_settings import DkNNSettings  # noqa: E402
from nlp_utils import UserError  # noqa: E402

K = 5
WORDS = ['the', 'film', 'was', 'a', 'plot', 'and', 'it', 'very', 'long', 'story']


@pytest.fixture(scope='module', autouse=True)
def local_ray():
    """One local Ray (2 CPUs) for the whole module; shut down at its end."""
    yield
    ray.shutdown()


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
    """A tiny bag-of-words run on 120 varied sentences (few exact duplicates)."""
    folder = tmp_path_factory.mktemp('ray_data')
    rng = np.random.RandomState(0)
    paths = []
    for name, n in (('train.txt', 120), ('test.txt', 30)):
        rows = []
        for _ in range(n):
            label = rng.randint(2)
            words = list(rng.choice(WORDS, rng.randint(3, 8))) + [['bad', 'good'][label]]
            rows.append('{} {}'.format(['neg', 'pos'][label], ' '.join(words)))
        paths.append(str(folder / name))
        with open(paths[-1], 'w') as f:
            f.write('\n'.join(rows) + '\n')
    out = folder / 'run'
    import train_text_classifier
    train_text_classifier.main(cli_helpers.train_argv(out, paths, '--n-calib', '30'))
    return model_setup.load_setup(str(out))


def engine(storage, **settings):
    return RayEngine(storage=str(storage), num_cpus=2, **dict(dict(shards=3, part_rows=16),
                                                              **settings))


@pytest.fixture(scope='module')
def flat_engine(tmp_path_factory):
    """3 flat shards over 6 activation parts, in a storage folder of this module."""
    return engine(tmp_path_factory.mktemp('ray_storage'))


def test_flat_shards_give_the_one_process_exact_dknn(tiny_run, flat_engine):
    local = dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K), use_cache=False)
    sharded = dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K, engine=flat_engine))
    assert len(sharded.indexes[0].searchers) == 3
    np.testing.assert_array_equal(sharded.calibration_scores, local.calibration_scores)
    test = tiny_run.model.layer_activations([x for x, _ in tiny_run.test])
    expected, found = local.predict_from_activations(test), sharded.predict_from_activations(test)
    for key in ('prediction', 'p_values', 'credibility', 'neighbors', 'neighbor_labels'):
        np.testing.assert_array_equal(found[key], expected[key], err_msg=key)
    np.testing.assert_allclose(found['neighbor_distances'], expected['neighbor_distances'],
                               rtol=1e-5, atol=1e-5)


@pytest.fixture(scope='module')
def tied_run(tmp_path_factory):
    """A tiny run whose sentences repeat (three words of four): its training rows tie
    exactly at the k-th place, as SNLI's premises and TREC's questions do."""
    folder = tmp_path_factory.mktemp('ray_tied')
    rng = np.random.RandomState(1)
    paths = []
    for name, n in (('train.txt', 150), ('test.txt', 40)):
        rows = ['{} {}'.format(['neg', 'pos'][rng.randint(2)], ' '.join(rng.choice(WORDS[:4], 3)))
                for _ in range(n)]
        paths.append(str(folder / name))
        with open(paths[-1], 'w') as f:
            f.write('\n'.join(rows) + '\n')
    import train_text_classifier
    train_text_classifier.main(cli_helpers.train_argv(folder / 'run', paths, '--n-calib', '40'))
    return model_setup.load_setup(str(folder / 'run'))


@pytest.mark.parametrize('n_shards', [1, 2, 3])
def test_ray_shards_give_the_one_process_bits_on_tied_rows(tied_run, tmp_path, n_shards):
    """Any shard count, against another exact backend (the KD-tree orders ties its own
    way): the same neighbours, calibration scores, predictions, credibility and
    confidence to the bit. The parts are written in this process as a Ray worker writes
    them (test_canonical_blocks.py shows the bytes are the same), so only the shards,
    their search and the merge run on Ray."""
    local = dknn_lib.dknn_from_setup(tied_run, DkNNSettings(K, 'kdtree'), use_cache=False)
    train, labels = tied_run.model.layer_activations([x for x, _ in tied_run.train]), \
        np.array([y for _, y in tied_run.train])
    parts = shards.ActivationParts(str(tmp_path / 'parts'), len(labels), 7, n_shards,
                                   'float32').start()
    for part, (start, stop) in enumerate(parts.ranges):
        parts.write(part, [layer[start:stop] for layer in train], labels[start:stop],
                    labels[start:stop])
    ray_engine = engine(tmp_path, shards=n_shards)
    indexes = search.sharded_indexes(ray_engine, parts, list(range(len(train))),
                                     str(tmp_path / 'index'), progress=False)
    sharded = dknn_lib.DkNN(tied_run.config.n_class, 'faiss', K).fit_indexes(
        indexes, labels, [layer.shape[1] for layer in train])
    dknn_lib.calibrated_on_split(sharded, tied_run, DkNNSettings(K))
    np.testing.assert_array_equal(sharded.calibration_scores, local.calibration_scores)
    test = tied_run.model.layer_activations([x for x, _ in tied_run.test])
    expected, found = local.predict_from_activations(test), sharded.predict_from_activations(test)
    for key in ('prediction', 'credibility', 'confidence', 'p_values', 'neighbors'):
        np.testing.assert_array_equal(found[key], expected[key], err_msg=key)


def test_merge_keeps_the_k_nearest_of_all_shards_ties_to_the_smaller_id():
    first = (np.array([[1.0, 3.0, 4.0]]), np.array([[7, 2, 9]]))
    second = (np.array([[2.0, 3.0, np.inf]]), np.array([[5, 1, -1]]))   # -1: shard ran short
    distances, ids = search.merge_top_k([first, second], 4)
    np.testing.assert_array_equal(ids, [[7, 5, 1, 2]])
    np.testing.assert_array_equal(distances, [[1.0, 2.0, 3.0, 3.0]])
    distances, ids = search.merge_top_k([(np.array([[1.0]]), np.array([[-1]]))], 1)
    assert ids[0, 0] == -1 and distances[0, 0] == np.inf


def random_parts(folder, n=1500, dim=16, seed=0):
    """Activation parts of n Gaussian vectors (no clusters, so IVF has to miss some
    neighbours), one layer, written as extraction would; -> (parts, vectors)."""
    vectors = np.random.RandomState(seed).normal(0, 1, (n, dim)).astype(np.float32)
    parts = shards.ActivationParts(str(folder), n, 200, 3, 'float32').start()
    for part, (start, stop) in enumerate(parts.ranges):
        labels = np.zeros(stop - start, np.int64)
        parts.write(part, [vectors[start:stop]], labels, labels)
    return parts, vectors


def recall(found, exact):
    return np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)])


def test_ivf_shards_keep_the_recall_of_one_ivf_index(tmp_path):
    parts, vectors = random_parts(tmp_path / 'train')
    queries = vectors[:200] + 0.1
    ray_engine = engine(tmp_path, kind='ivf', nlist=24, nprobe=3, part_rows=200)
    sharded = search.sharded_indexes(ray_engine, parts, [0], str(tmp_path / 'index'),
                                     progress=False)[0]
    exact = knn_index.FaissIndex('flat').build(vectors).search(queries, 10)[1]
    one = knn_index.FaissIndex('ivf', nlist=24, nprobe=3).build(vectors).search(queries, 10)[1]
    found = sharded.search(queries, 10)[1]
    assert 0.5 < recall(one, exact) < 0.8        # approximate: nprobe=3 of 24 lists
    assert abs(recall(found, exact) - recall(one, exact)) < 0.05
    # With the shards' own trained quantizer, one index over all rows answers the same.
    one = one_index_like_the_shards(ray_engine, str(tmp_path / 'index'), vectors)
    np.testing.assert_array_equal(found, one.search(queries, 10)[1])


def one_index_like_the_shards(ray_engine, model_dir, vectors):
    """One faiss index over all `vectors`, copied from the trained (empty) index the
    shards of layer 0 were built from, searched with the engine's nprobe."""
    import faiss
    folder = shards.index_folder(model_dir, dict(
        ray_engine.index_options(), layers=[0], n_rows=len(vectors), dtype='float32'))
    one = faiss.read_index(os.path.join(folder, 'layer_0', 'trained.faiss'))
    one.add(vectors)
    one.nprobe = ray_engine.nprobe
    return one


def test_ivfpq_shards_answer_as_one_index_with_their_shared_codebook(tmp_path):
    parts, vectors = random_parts(tmp_path / 'train')
    queries = vectors[:50] + 0.1
    ray_engine = engine(tmp_path, kind='ivfpq', nlist=8, nprobe=8, pq_m=4, part_rows=200)
    found = search.sharded_indexes(ray_engine, parts, [0], str(tmp_path / 'index'),
                                   progress=False)[0].search(queries, 10)
    one = one_index_like_the_shards(ray_engine, str(tmp_path / 'index'), vectors)
    assert one.pq.M == 4 and one.nlist == 8              # the settings reached the index
    # Each shard re-ranks its own candidates by the neighbour rule: their union holds the
    # one index's candidates (same codes, same approximate distances), so the shards'
    # i-th neighbour is never farther than the one index's re-ranked i-th.
    def candidates(batch, m):
        squared, ids = one.search(batch, m)
        return np.sqrt(np.maximum(squared, 0)), ids
    distances, _ = neighbor_rule.ranked(candidates, vectors, queries, 10, False, 0.0,
                                           neighbor_rule.max_row_norm(vectors))
    assert (found[0] <= distances.astype(np.float32)).all()
    assert (found[0] < distances.astype(np.float32)).any()     # and it is not the same


class DyingExtractor(activations.PartExtractor):
    """Kills its own worker process the first time it is given part 2 (a marker file
    remembers that it did), after parts before it were written."""

    def extract(self, part):
        marker = os.path.join(self.parts.folder, '..', 'died')
        if part == 2 and not os.path.exists(marker):
            open(marker, 'w').close()
            os._exit(1)
        super().extract(part)


def test_a_worker_killed_mid_extraction_is_resumed_with_the_same_activations(
        tiny_run, tmp_path):
    # Ray's workers cannot import tests/: the dying class travels by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray_engine = engine(tmp_path, workers=1, part_rows=10)
    key = dknn_lib.activation_key(tiny_run)
    # Ray Data restarts the dead actor and gives part 2 to it again.
    parts = activations.extract_split(ray_engine, tiny_run, 'train', key, progress=False,
                                      extractor=DyingExtractor)
    assert os.path.exists(os.path.join(shards.model_folder(str(tmp_path), key), 'died'))
    expected = tiny_run.model.layer_activations([x for x, _ in tiny_run.train])

    def check_activations():
        for i, layer in enumerate(expected):
            np.testing.assert_array_equal(parts.column('layer_{}'.format(i)), layer)
        np.testing.assert_array_equal(parts.column('gold'), [y for _, y in tiny_run.train])
        assert not [n for n in os.listdir(parts.folder) if n.startswith('.tmp')]
    check_activations()
    # A job that died before writing parts 3 and 7 resumes with those two alone.
    written = {part: os.stat(parts.path(part)).st_mtime_ns for part in range(len(parts.ranges))}
    for part in (3, 7):
        os.remove(parts.path(part))
    parts = activations.extract_split(ray_engine, tiny_run, 'train', key, progress=False)
    rewritten = [part for part in written
                 if os.stat(parts.path(part)).st_mtime_ns != written[part]]
    assert rewritten == [3, 7]
    check_activations()


class NanExtractor(activations.PartExtractor):
    """Meets a model whose activations are not finite on part 1."""

    def extract(self, part):
        if part == 1:
            raise UserError('layer 0 of rows 16-31 contains NaN or inf')
        super().extract(part)


def test_an_error_inside_a_worker_reaches_the_driver_as_one_line(tiny_run, tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with pytest.raises(UserError) as raised:
        activations.extract_split(engine(tmp_path, workers=1), tiny_run, 'train',
                                  dknn_lib.activation_key(tiny_run), progress=False,
                                  extractor=NanExtractor)
    assert str(raised.value) == 'layer 0 of rows 16-31 contains NaN or inf'


def test_a_failure_of_ray_itself_is_one_line(monkeypatch):
    from deepknn.distributed import engine as engine_lib

    def lost(refs):
        raise ray.exceptions.ActorUnschedulableError('the node was lost\n  traceback ...')
    monkeypatch.setattr(ray, 'get', lost)
    with pytest.raises(UserError) as raised:
        engine_lib.get([])
    assert str(raised.value).startswith('Ray failed: ActorUnschedulableError (')
    assert '\n' not in str(raised.value) and '`ray status`' in str(raised.value)


def test_float16_storage_halves_the_bytes_and_rounds_only(tiny_run, tmp_path):
    key = dknn_lib.activation_key(tiny_run)
    parts = activations.extract_split(engine(tmp_path, dtype='float16', workers=1), tiny_run,
                                      'calib', key, progress=False)
    expected = tiny_run.model.layer_activations([x for x, _ in tiny_run.calib])[0]
    np.testing.assert_array_equal(parts.column('layer_0'), expected.astype(np.float16))


def test_a_missing_or_corrupt_shard_is_a_one_line_error(tiny_run, flat_engine):
    dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K, engine=flat_engine))   # built (or reused)
    [folder] = [os.path.join(root, name) for root, names, _ in os.walk(flat_engine.storage)
                for name in names if name.startswith('index-')]
    shard = shards.shard_path(folder, 0, 1)
    with open(shard, 'rb') as f:
        original = f.read()
    try:
        with open(shard, 'r+b') as f:
            f.seek(100)
            f.write(bytes(255 - b for b in original[100:103]))
        with pytest.raises(UserError, match='shard_001.faiss is corrupt') as corrupt:
            dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K, engine=flat_engine))
        os.remove(shard)
        with pytest.raises(UserError, match='shard_001.faiss is missing') as missing:
            dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K, engine=flat_engine))
    finally:
        with open(shard, 'wb') as f:
            f.write(original)
    assert '\n' not in str(corrupt.value) + str(missing.value)


def test_run_dknn_reports_the_engine_beside_the_one_process_report(tiny_run, tmp_path,
                                                                     capsys):
    argv = ['--model-setup', tiny_run.result_dir, '--k', str(K), '--out', str(tmp_path)]
    assert cli_helpers.cli(run_dknn.main, argv, capsys)[0] == 0
    ray_argv = argv + ['--engine', 'ray', '--storage', str(tmp_path / 'storage'),
                       '--workers', '1', '--shards', '2']
    assert cli_helpers.cli(run_dknn.main, ray_argv, capsys)[0] == 0
    local = nlp_utils.read_json(str(tmp_path / 'dknn_test_faiss_k{}.json'.format(K)))
    sharded = nlp_utils.read_json(str(tmp_path / 'dknn_test_faiss_ray_k{}.json'.format(K)))
    assert sharded['engine'].startswith('ray: 2 shards (flat), 1 workers, cluster local')
    for key in ('dknn_accuracy', 'softmax_accuracy', 'n_examples'):
        assert sharded[key] == local[key]


def test_a_corrupt_activation_part_is_a_one_line_error_also_from_a_shard_task(tmp_path):
    parts, _ = random_parts(tmp_path / 'train')
    with open(parts.path(1), 'r+b') as f:
        f.seek(os.path.getsize(parts.path(1)) // 2)
        f.write(b'\xff' * 8)
    with pytest.raises(UserError, match='part_00001.npz is corrupt'):
        parts.column('layer_0')
    with pytest.raises(UserError, match='^activation part .*part_00001.npz is corrupt') as raised:
        search.sharded_indexes(engine(tmp_path, part_rows=200), parts, [0],
                               str(tmp_path / 'index'), progress=False)
    assert '\n' not in str(raised.value)


def test_parts_cover_every_row_once_and_a_changed_plan_is_refused(tmp_path):
    assert shards.plan_parts(10, 4, 2) == [(0, 3), (3, 6), (6, 10)]
    assert shards.plan_parts(5, 100, 2) == [(0, 2), (2, 5)]
    assert shards.shard_parts(3, 2) == [[0], [1, 2]]
    shards.ActivationParts(str(tmp_path), 10, 4, 2, 'float32').start()
    shards.ActivationParts(str(tmp_path), 10, 4, 3, 'float32').start()   # the same 3 parts
    with pytest.raises(UserError, match='another plan'):
        shards.ActivationParts(str(tmp_path), 10, 2, 2, 'float32').start()


@pytest.mark.parametrize('flags, message', [
    (['--shards', '3'], '--shards needs --engine ray'),
    (['--engine', 'ray', '--backend', 'kdtree'], 'pass --backend faiss'),
    (['--engine', 'ray', '--faiss-kind', 'hnsw'], 'not --faiss-kind hnsw'),
    (['--engine', 'ray', '--ray-address', '127.0.0.1:1'], 'no Ray head answers there')])
def test_engine_flags_are_checked_before_any_work(tiny_run, tmp_path, capsys, flags, message):
    status, lines = cli_helpers.cli(run_dknn.main, ['--model-setup', tiny_run.result_dir,
                                                    '--out', str(tmp_path)] + flags, capsys)
    assert status == 2 and len(lines) == 1 and message in lines[0]
    assert os.listdir(str(tmp_path)) == []


def test_run_dknn_evaluates_its_split_through_the_pipeline(tiny_run, tmp_path, capsys):
    """With --engine ray the evaluated split's activations are extracted by the Ray Data
    pipeline too (stored as parts beside train and calib), equal to the one-process
    activations, and the per-example predictions equal the local report's."""
    storage = tmp_path / 'storage'
    argv = ['--model-setup', tiny_run.result_dir, '--k', str(K), '--out', str(tmp_path),
            '--split', 'dev']
    assert cli_helpers.cli(run_dknn.main, argv, capsys)[0] == 0
    assert cli_helpers.cli(run_dknn.main, argv + ['--engine', 'ray', '--storage', str(storage),
                                                  '--workers', '1'], capsys)[0] == 0
    model_folder = shards.model_folder(str(storage), dknn_lib.activation_key(tiny_run))
    assert {'calib', 'dev', 'train'} <= set(os.listdir(model_folder))
    parts = activations.extract_split(engine(storage, workers=1), tiny_run, 'dev',
                                      dknn_lib.activation_key(tiny_run), progress=False)
    assert not parts.worker_peak_mib           # every part was there: nothing re-extracted
    local = tiny_run.model.layer_activations([x for x, _ in tiny_run.dev])
    for i, layer in enumerate(local):
        np.testing.assert_array_equal(parts.column('layer_{}'.format(i)), layer)
    with np.load(str(tmp_path / 'dknn_predictions_dev_faiss_k{}.npz'.format(K))) as one, \
            np.load(str(tmp_path / 'dknn_predictions_dev_faiss_ray_k{}.npz'.format(K))) as ray_:
        for key in ('label', 'prediction', 'credibility', 'confidence', 'softmax_probability'):
            np.testing.assert_array_equal(ray_[key], one[key])


def csv_text(path):
    with open(str(path)) as f:
        return f.read()


def test_a_paper_results_analysis_gives_the_same_numbers_on_ray(tiny_run, tmp_path):
    import paper_results
    results, run = os.path.split(tiny_run.result_dir)
    for engine_flags, out in (([], 'local'), (['--engine', 'ray', '--workers', '1', '--storage',
                                               str(tmp_path / 'storage')], 'ray')):
        paper_results.main(['--results', results, '--out', str(tmp_path / out), 'faithfulness',
                            '--run', run, '--k', str(K), '--limit', '4', '--no-curves',
                            '--methods', 'conformity,confidence'] + engine_flags)
    name = 'faithfulness_{}_test.csv'.format(run)
    assert csv_text(tmp_path / 'ray' / name) == csv_text(tmp_path / 'local' / name)


def test_knn_backoff_gives_the_same_numbers_on_ray(tiny_run, tmp_path):
    import run_knn_representations
    for engine_flags, stem in (([], 'local'), (['--engine', 'ray', '--workers', '1', '--storage',
                                                str(tmp_path / 'storage')], 'ray')):
        run_knn_representations.main(['backoff', '--model-setup', tiny_run.result_dir,
                                      '--dknn-k', str(K), '--table', str(tmp_path / stem)]
                                     + engine_flags)
    assert csv_text(tmp_path / 'ray.csv') == csv_text(tmp_path / 'local.csv')
    assert 'credibility' in csv_text(tmp_path / 'ray.csv')
