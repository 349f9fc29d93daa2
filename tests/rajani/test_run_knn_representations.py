"""run_knn_representations.py on tiny models trained on synthetic data."""
import csv
import json
import os

import pytest

import cli_helpers
from deepknn.cli import command_line_message
from deepknn.rajani import knn_representations as knn
from deepknn.models import model_setup
from deepknn.reports import knn_tables
import run_knn_representations as cli
import train_text_classifier
from nlp_utils import UserError
from tests.commands.test_end_to_end import synthetic_lines


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp('knn')
    (folder / 'train.txt').write_text(synthetic_lines(200, 0))
    (folder / 'test.txt').write_text(synthetic_lines(40, 1))

    def train(name, *extra):
        train_text_classifier.main([
            '--dataset', 'custom', '--train-file', str(folder / 'train.txt'),
            '--test-file', str(folder / 'test.txt'), '--model', 'cnn', '--unit', '12',
            '--embed-dim', '8', '--epoch', '4', '--min-freq', '1', '--batchsize', '16',
            '--out', str(folder / name)] + list(extra))
        return str(folder / name / 'args.json')
    return folder, train('plain', '--n-calib', '30'), train('noisy', '--n-calib', '0',
                                                            '--label-noise', '0.1')


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_fixed_tau_zero_keeps_the_model_and_one_backs_off_always(runs):
    folder, plain, _ = runs
    stem = str(folder / 'tau0')
    cli.main(['backoff', '--model-setup', plain, '--tau', '0', '--table', stem])
    row = read_csv(stem + '.csv')[0]
    assert row['knn_backoff'] == row['model'] and row['tau'] == '0.0'
    assert read_csv(stem + '_table5.csv')[0]['CNN'] == '0.0'
    table4 = {r['model']: r['custom'] for r in read_csv(stem + '_table4.csv')}
    assert table4['CNN'] == table4['kNN-CNN'] == row['model']
    assert row['n_below_tau'] == '0' and row['credibility_backoff'] != ''   # calib split: DkNN
    with pytest.raises(UserError, match='tau0.md exists; pass --overwrite'):
        cli.main(['backoff', '--model-setup', plain, '--tau', '1', '--table', stem])
    cli.main(['backoff', '--model-setup', plain, '--tau', '1', '--table', stem, '--overwrite'])
    row = read_csv(stem + '.csv')[0]
    assert row['knn_backoff'] == row['knn_alone'] and row['n_below_tau'] == row['n_test']
    assert open(stem + '.md').read().startswith('# kNN backoff')
    assert 'Produced by: `python' in open(stem + '_table4.md').read()
    assert model_line(plain) in open(stem + '_table4.md').read()   # the weights it read


def model_line(args_path):
    """'<run folder> (parameters sha256 <first 12 hex>)' of a run, hashed here
    independently."""
    folder = os.path.dirname(args_path)
    digest = cli_helpers.npz_digest(os.path.join(folder, 'best_model.npz'))
    return '{} (parameters sha256 {})'.format(os.path.relpath(folder), digest)


def test_tuned_backoff_is_at_least_as_good_as_the_model_on_dev(runs):
    folder, plain, _ = runs
    cli.main(['backoff', '--model-setup', plain, '--table', str(folder / 'tuned')])
    with open(os.path.join(os.path.dirname(plain), 'knn_backoff.json')) as f:
        result = json.load(f)['confidence']
    assert result['dev_accuracy'] >= result['dev_model_accuracy']   # tau=0 is in the grid
    assert result['k'] in knn.k_grid(200 - 20 - 30)


@pytest.mark.parametrize('flags, message', [
    (['--tau', '1.5'], '--tau'), (['--tau', '-0.5'], '--tau'), (['--temperature', '0'], '--temperature'),
    (['--k', '100000'], '--k'), (['--layer', '7'], '--layer')])
def test_bad_backoff_flags_are_one_line_errors(runs, flags, message):
    folder, plain, _ = runs
    with pytest.raises(UserError) as error:
        cli.main(['backoff', '--model-setup', plain, '--table', str(folder / 'bad')] + flags)
    shown = command_line_message(error.value)   # what the command line prints
    assert shown.startswith(message) and '\n' not in shown
    assert ('smaller' in shown) == (flags == ['--k', '100000'])


def test_backoff_k_below_one_is_refused_when_the_flags_are_read(runs, capsys):
    folder, plain, _ = runs
    with pytest.raises(SystemExit):
        cli.main(['backoff', '--model-setup', plain, '--table', str(folder / 'bad'), '--k', '0'])
    assert 'argument --k: must be an integer >= 1' in capsys.readouterr().err


def test_an_empty_dev_split_is_refused(runs):
    _, plain, _ = runs
    setup = model_setup.load_setup(plain)
    setup.splits.dev = []
    with pytest.raises(UserError, match='dev split has no examples'):
        knn.backoff_experiment(setup)


def test_explain_writes_escaped_html_and_json_with_k_neighbours(runs):
    folder, plain, _ = runs
    stem = str(folder / 'explained')
    cli.main(['explain', '--model-setup', plain, '--examples', '0', '3', '--k', '5',
              '--out', stem])
    records = json.load(open(stem + '.json'))
    assert [r['example'] for r in records] == [0, 3]
    assert all(len(r['neighbors']) == 5 for r in records)
    distances = [n['sq_distance'] for n in records[0]['neighbors']]
    assert distances == sorted(distances)
    assert sum(records[0]['knn_vote'].values()) == pytest.approx(1.0)
    page = open(stem + '.html').read()
    assert page.startswith('<!DOCTYPE html>') and records[0]['neighbors'][0]['text'] in page
    assert 'Model: {}. Produced by: python'.format(model_line(plain)) in page
    assert 'Nearest training examples: custom test (test.txt) (k=5)' in page
    with pytest.raises(UserError, match='--examples'):
        cli.main(['explain', '--model-setup', plain, '--examples', '999', '--out', stem])


def test_retrieved_counts_sum_to_k_per_query(runs):
    folder, plain, _ = runs
    stem = str(folder / 'retrieved')
    cli.main(['retrieved', '--model-setup', plain, '--split', 'train', '--k', '3', '--top', '150',
              '--out', stem])
    rows = read_csv(stem + '.csv')
    counts = [int(r['times_retrieved']) for r in rows]
    assert counts == sorted(counts, reverse=True) and sum(counts) == 150 * 3   # all 150 listed


def test_detect_scores_against_the_flipped_set(runs):
    folder, _, noisy = runs
    stem = str(folder / 'detect')
    cli.main(['detect', '--model-setup', noisy, '--out', stem])
    rows = read_csv(stem + '.csv')
    # The scores' known answers: test_rajani_known_answers.py. Here: a trained model's run.
    assert rows[0]['n_flipped'] == str(round(0.1 * 180)) and rows[-1]['run'] == 'mean of 1 seed'
    assert {r['method'] for r in rows} == {'kNN rule (paper)', 'cleanlab, kNN from features',
                                           'cleanlab, cross-validated probe'}
    assert os.path.getsize(stem + '.png') > 1000 and os.path.exists(stem + '_rankings.md')
    assert 'Models: {}.'.format(model_line(noisy)) in open(stem + '_rankings.md').read()
    with pytest.raises(UserError, match='label.noise'):
        cli.main(['detect', '--model-setup', runs[1], '--out', stem, '--overwrite'])


def test_detect_refuses_to_average_runs_that_differ_in_more_than_the_seed(runs):
    folder, plain, noisy = runs
    stem = str(folder / 'detect_mixed')
    with pytest.raises(UserError, match=r'differ in more than the seed \(n_calib 0 vs 30; '
                                        r'label_noise 0.1 vs 0.0\)'):
        cli.main(['detect', '--model-setup', noisy, plain, '--out', stem])
    assert not os.path.exists(stem + '.md')


def test_seed_replicates_may_differ_only_in_the_seeds():
    base = model_setup.RunConfig.from_json(dict(
        dataset='stsa.binary', model='cnn', unit=8, layer=1, dropout=0.0, embed_dim=8,
        n_class=2, seed=0, n_calib=0, char_based=False, pair=False, vocab_path='vocab.json',
        model_path='best_model.npz', label_noise=0.1))
    seeds = base.replace(seed=1, label_noise_seed=1, data_digest='x', n_vocab=7)
    knn_tables.check_seed_replicates([base, seeds], ['a', 'b'])
    other = seeds.replace(dataset='snli', n_class=3)
    with pytest.raises(UserError, match="a and c differ in more than the seed \\(dataset "
                                        "'stsa.binary' vs 'snli'; n_class 2 vs 3\\)"):
        knn_tables.check_seed_replicates([base, seeds, other], ['a', 'b', 'c'])


def test_retrieved_and_explain_replace_an_existing_table_only_when_asked(runs):
    folder, plain, _ = runs
    stem = str(folder / 'committed')
    open(stem + '.md', 'w').write('committed numbers\n')
    with pytest.raises(UserError, match='committed.md exists; pass --overwrite'):
        cli.main(['retrieved', '--model-setup', plain, '--k', '3', '--out', stem])
    assert open(stem + '.md').read() == 'committed numbers\n'
    cli.main(['retrieved', '--model-setup', plain, '--k', '3', '--out', stem, '--overwrite'])
    assert open(stem + '.md').read().startswith('# Training examples retrieved most often')
    open(stem + '.html', 'w').write('mine')
    with pytest.raises(UserError, match='committed.html exists; pass --overwrite'):
        cli.main(['explain', '--model-setup', plain, '--out', stem])


@pytest.mark.parametrize('script, flags', [
    ('bench_dknn_throughput.py', ['--model-setup', 'RUN']),
    ('bench_input_reduction.py', ['--model-setup', 'RUN']),
    ('bench_knn_scale.py', []), ('bench_lstm.py', [])])
def test_benchmarks_keep_an_existing_table(tmp_path, script, flags):
    import subprocess
    import sys
    table = tmp_path / 'table.md'
    table.write_text('committed numbers\n')
    (tmp_path / 'args.json').write_text('{}')     # a run, never loaded: the table stops first
    flags = [str(tmp_path / 'args.json') if flag == 'RUN' else flag for flag in flags]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, os.path.join(root, 'benchmarks', script)] + flags +
                          ['--out', str(table)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and 'table.md exists; pass --overwrite' in done.stderr
    assert table.read_text() == 'committed numbers\n'


def test_backoff_on_a_file_of_the_test_lines_gives_the_test_split_s_numbers(runs):
    folder, plain, _ = runs
    cli.main(['backoff', '--model-setup', plain, '--out', str(folder), '--name', 'on_test'])
    cli.main(['backoff', '--model-setup', plain, '--out', str(folder), '--name', 'on_file',
              '--eval-file', str(folder / 'test.txt')])
    on_test, on_file = read_csv(str(folder / 'on_test.csv'))[0], read_csv(
        str(folder / 'on_file.csv'))[0]
    assert (on_test['tested on'], on_file['tested on']) == ('test', 'file-test')
    for column in ('k', 'T', 'tau', 'model', 'knn_backoff', 'credibility_backoff', 'n_test'):
        assert on_file[column] == on_test[column], column      # tuned on dev alike
    assert os.path.exists(os.path.join(os.path.dirname(plain), 'knn_backoff_file-test.json'))
