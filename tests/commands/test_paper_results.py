import csv
import json
import types

import numpy as np
import pytest

import cli_helpers

from deepknn.faithfulness import report as faithfulness_report
from deepknn.reports.tables import verdict
from deepknn.reports import paper_analyses
from deepknn.reports import paper_numbers
import paper_results
from deepknn.reports import table1 as table1_report
from deepknn.reports import tables
from deepknn.reports import training_table
from deepknn.models.model_setup import RunConfig
from deepknn.interpret.leave_one_out import Interpretation
from nlp_utils import UserError

SCRIPT = paper_results.TRAINING_SCRIPT   # what the training table's rerun commands call


def args_json(**values):
    """args.json text of a run: the fields every folder has, plus `values`."""
    required = dict(dataset='TREC', model='cnn', unit=300, layer=3, dropout=0.4, embed_dim=50,
                    n_class=6, seed=777, n_calib=1000, char_based=False, pair=False,
                    vocab_path='vocab.json', model_path='best_model.npz')
    return json.dumps(dict(required, **values))


def test_terribly_paraphrases_replace_each_great_of_positive_sentences():
    examples = [(['a', 'great', 'film', ',', 'Great', 'cast'], 1), (['great', 'but', 'no'], 0)]
    paraphrases = paper_analyses.terribly_paraphrases(examples, positive_label=1)
    assert len(paraphrases) == 6
    tokens, label, position = paraphrases[0]
    assert tokens == ['a', 'terribly', 'awesome', 'film', ',', 'Great', 'cast']
    assert (label, position) == (1, 1)
    tokens, _, position = paraphrases[5]
    assert tokens[position:position + 2] == ['terribly', 'impressive'] and position == 4


def interpretation(hypothesis, scores, prediction):
    return Interpretation(tokens=hypothesis, scores=np.array(scores, float),
                          prediction=prediction, score=1.0, label=None, premise=['p'])


def test_artifact_ranks_count_only_matching_predictions():
    setup = types.SimpleNamespace(label_names=['entailment', 'neutral', 'contradiction'])
    maps = [interpretation(['nobody', 'is', 'here'], [0.9, 0.1, 0.3], 2),   # rank 1
            interpretation(['a', 'nobody', 'sits'], [0.5, 0.2, 0.4], 2),    # rank 3
            interpretation(['nobody', 'sits'], [0.9, 0.1], 0)]              # not contradiction
    rows = paper_analyses.artifact_rows(setup, {'conformity': maps, 'confidence': maps[:1]})
    nobody = [r for r in rows if r['artifact'] == 'nobody'][0]
    assert nobody['conformity'] == 2.0 and nobody['n_conformity'] == 2
    assert nobody['confidence'] == 1.0 and nobody['n_confidence'] == 1
    assert nobody['paper_conformity'] == 1.00
    outdoors = [r for r in rows if r['artifact'] == 'outdoors'][0]
    assert outdoors['conformity'] is None and outdoors['n_conformity'] == 0


def test_table1_collects_runs_and_marks_missing(tmp_path):
    folder = tmp_path / 'TREC_cnn'
    folder.mkdir()
    (folder / 'dknn_test_kdtree.json').write_text(json.dumps(
        {'softmax_accuracy': 0.9, 'dknn_accuracy': 0.8875, 'backend': 'kdtree', 'k': 75}))
    (folder / 'dknn_dev_kdtree.json').write_text(json.dumps(
        {'softmax_accuracy': 0.85, 'dknn_accuracy': 0.86, 'backend': 'kdtree', 'k': 75}))
    (folder / 'args.json').write_text(args_json(epoch=30, seed=777))
    cli_helpers.write_weights(folder / 'best_model.npz', b'trec weights')
    seed = tmp_path / 'TREC_cnn_seed1'
    seed.mkdir()
    (seed / 'dknn_test_faiss.json').write_text(json.dumps(
        {'softmax_accuracy': 0.5, 'dknn_accuracy': 0.5, 'backend': 'faiss', 'k': 5}))
    (seed / 'args.json').write_text(args_json(epoch=2, seed=1))
    with pytest.raises(UserError, match=r'TREC_cnn_seed1/best_model.npz does not exist'):
        table1_report.table1_rows(str(tmp_path))     # a report without its model
    cli_helpers.write_weights(seed / 'best_model.npz', b'seed weights')
    rows = table1_report.table1_rows(str(tmp_path))
    trec, trec_seed = [r for r in rows if r['model'] == 'CNN' and r['dataset'] == 'TREC']
    assert trec_seed['run'] == 'TREC_cnn_seed1' and trec_seed['softmax'] == 50.0
    assert (trec['softmax'], trec['dknn'], trec['difference']) == (90.0, 88.8, -1.2)
    assert (trec['paper_softmax'], trec['paper_dknn']) == (92.8, 92.4)
    assert (trec['dev_softmax'], trec['dev_dknn']) == (85.0, 86.0)
    assert trec_seed['dev_dknn'] is None and trec_seed['backend'] == 'faiss'
    assert trec['model_sha256'] == cli_helpers.weights_digest(b'trec weights')
    sst = [r for r in rows if r['model'] == 'BiLSTM' and r['dataset'] == 'SST'][0]
    assert sst['softmax'] is None
    snli = {r['model']: r for r in rows if r['dataset'] == 'SNLI'}   # section 4's numbers
    assert (snli['BiLSTM']['paper_softmax'], snli['BiLSTM']['paper_dknn']) == (81.2, 81.0)
    assert snli['CNN']['run'] == 'snli_cnn' and snli['CNN']['paper_softmax'] == ''
    table = tables.markdown_table(rows, ['model', 'dataset', 'softmax'])
    assert '| CNN | TREC | 90.0 |' in table and '| BiLSTM | SST | not run |' in table
    assert tables.csv_text(rows[:1], ['model', 'softmax']) == 'model,softmax\nBiLSTM,\n'


def test_a_pipe_or_line_break_in_a_cell_keeps_the_markdown_row_whole():
    table = tables.markdown_table([{'token': 'a|b', 'text': 'one\ntwo', 'n': 1}],
                                  ['token', 'text', 'n'])
    header, rule, row = table.strip().split('\n')
    assert row == '| a\\|b | one two | 1 |'
    assert row.replace('\\|', '').count('|') == header.count('|') == 4


def test_reliability_of_random_bytes_is_one_line_not_pickled_data(tmp_path, capsys):
    from cli_helpers import assert_one_line_error, cli
    run = tmp_path / 'results' / 'demo_run'
    run.mkdir(parents=True)
    (run / 'args.json').write_text('{}')
    (run / 'dknn_predictions_test_faiss.npz').write_bytes(np.random.RandomState(0).bytes(300))
    status, err = cli(paper_results.main, ['--results', str(tmp_path / 'results'), '--out',
                                           str(tmp_path / 'out'), 'reliability', '--run',
                                           'demo_run'], capsys)
    assert_one_line_error(status, err, 'dknn_predictions_test_faiss.npz is not an npz file',
                          'run run_dknn.py --model-setup {} again'.format(run / 'args.json'))
    assert 'pickle' not in err[0]


def test_table1_summary_averages_seeds_per_vocabulary_and_backend():
    row = dict(table1_report.table1_empty_row('TREC_cnn', 'cnn', 'TREC'), backend='faiss',
               vocab='pretrained', epochs=30)
    rows = [dict(row, softmax=90.0, dknn=89.0, difference=-1.0, dev_softmax=88.0),
            dict(row, softmax=92.0, dknn=92.0, difference=0.0, dev_softmax=None),
            dict(row, softmax=80.0, dknn=80.0, difference=0.0, vocab='train')]
    pretrained, train = table1_report.table1_summary(rows)
    assert (pretrained['softmax'], pretrained['softmax_sd'], pretrained['dknn']) == (91.0, 1.0, 90.5)
    assert (pretrained['seeds'], pretrained['dev_softmax'], pretrained['difference']) == (2, 88.0, -0.5)
    assert (train['seeds'], train['softmax'], train['softmax_sd']) == (1, 80.0, '')


def test_table1_summary_keeps_training_budgets_apart():
    row = dict(table1_report.table1_empty_row('SST_bilstm', 'bilstm', 'SST'), backend='faiss',
               vocab='pretrained', difference=0.0)
    rows = [dict(row, softmax=80.0, dknn=80.0, epochs=5),
            dict(row, softmax=84.0, dknn=84.0, epochs=10)]
    five, ten = table1_report.table1_summary(rows)
    assert (five['epochs'], five['softmax'], five['seeds']) == (5, 80.0, 1)
    assert (ten['epochs'], ten['softmax'], ten['seeds']) == (10, 84.0, 1)


def test_table1_leaves_out_entropy_finetuned_models(tmp_path):
    for name, extra in (('TREC_cnn', {}), ('TREC_cnn_entropy', {'finetuned_from': '../TREC_cnn'})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / 'dknn_test_faiss.json').write_text(json.dumps(
            {'softmax_accuracy': 0.9, 'dknn_accuracy': 0.9, 'backend': 'faiss', 'k': 75}))
        (folder / 'args.json').write_text(args_json(epoch=30, seed=777, **extra))
        cli_helpers.write_weights(folder / 'best_model.npz', b'weights')
    rows = [r for r in table1_report.table1_rows(str(tmp_path)) if r['dataset'] == 'TREC'
            and r['model'] == 'CNN']
    assert [r['run'] for r in rows] == ['TREC_cnn']


def test_table1_keeps_the_rows_of_runs_it_cannot_measure_here(tmp_path):
    results, out = tmp_path / 'results', tmp_path / 'out'
    results.mkdir()
    out.mkdir()
    folder = results / 'TREC_minilm'                        # present: measured afresh
    folder.mkdir()
    (folder / 'dknn_test_faiss.json').write_text(json.dumps(
        {'softmax_accuracy': 0.95, 'dknn_accuracy': 0.94, 'backend': 'faiss', 'k': 75}))
    (folder / 'args.json').write_text(args_json(epoch=3, seed=777, model='minilm', vocab='pretrained'))
    cli_helpers.write_weights(folder / 'best_model.npz', b'minilm weights')
    columns = ('model,dataset,run,seed,vocab,softmax,dknn,difference,dev_softmax,dev_dknn,epochs,'
               'backend,k,model_sha256')
    (out / 'table1_runs.csv').write_text('\n'.join([
        columns,
        'CNN,TREC,TREC_cnn,777,pretrained,91.0,92.0,1.0,89.0,88.0,30,faiss,75,0123456789ab',
        'CNN,TREC,TREC_cnn_seed1,1,pretrained,93.0,92.0,-1.0,,,30,faiss,75,',   # no hash
        'MiniLM,TREC,TREC_minilm,777,pretrained,10.0,10.0,0.0,,,3,faiss,75,',   # stale
        'CNN,SUBJ,subj_cnn,777,pretrained,92.0,92.5,0.5,,,30,faiss,75,',   # retraining
        'BiLSTM,SST,stsa.binary_bilstm,,,,,,,,,,,']) + '\n')       # never ran: not carried
    (results / 'subj_cnn').mkdir()                          # no DkNN report yet
    paper_results.main(['--results', str(results), '--out', str(out), '--overwrite', 'table1'])
    with open(out / 'table1_runs.csv') as f:
        runs = {row['run']: row for row in csv.DictReader(f)}
    assert runs['TREC_minilm']['softmax'] == '95.0'
    assert runs['TREC_minilm']['model_sha256'] == cli_helpers.weights_digest(b'minilm weights')
    assert runs['TREC_cnn']['model_sha256'] == '0123456789ab'           # kept as tabled
    assert runs['TREC_cnn_seed1']['model_sha256'] == 'not recorded'
    assert (runs['TREC_cnn']['dknn'], runs['TREC_cnn_seed1']['seed']) == ('92.0', '1')
    assert runs['stsa.binary_bilstm']['softmax'] == ''
    with open(out / 'table1.csv') as f:
        summary = [r for r in csv.DictReader(f) if r['dataset'] == 'TREC' and r['model'] == 'CNN']
    assert [(r['softmax'], r['softmax_sd'], r['seeds']) for r in summary] == [('92.0', '1.0', '2')]
    header = (out / 'table1.md').read_text()
    assert runs['subj_cnn']['dknn'] == '92.5'
    assert '3 runs kept from the previous table1_runs.csv' in header
    assert 'TREC_cnn, TREC_cnn_seed1, subj_cnn.' in header
    assert '2 of them were tabled before tables named their weights' in header
    runs_header = (out / 'table1_runs.md').read_text()
    assert '2 of them were tabled' in runs_header and 'model_sha256: the first 12' in runs_header


def test_mean_highlighted_under_each_normalization():
    maps = [interpretation(['a', 'b', 'c'], [0.9, 0.06, -0.04], 1),   # total 1.0
            interpretation(['a', 'b'], [0.92, 0.08], 1),
            interpretation(['x'], [np.nan], 1)]                        # one token: left out
    # total: [0.9, 0.06, -0.04] -> 2 and [0.92, 0.08] -> 2; per sign the lone -0.04
    # becomes -1 -> 3 and 2; half-scale: [0.47, 0.03, -0.5] -> 2 and [0.46, 0.04] -> 1.
    assert paper_analyses.mean_highlighted(maps, 'total') == 2.0
    assert paper_analyses.mean_highlighted(maps, 'per-sign') == 2.5
    assert paper_analyses.mean_highlighted(maps, 'half-scale') == 1.5


def test_mean_terribly_rank_is_toward_the_positive_class():
    paraphrases = [(['x', 'terribly', 'good'], 1, 1), (['terribly', 'good', 'y'], 1, 0)]
    maps = [interpretation(['x', 'terribly', 'good'], [0.1, -0.5, 0.9], 1),   # rank 1
            # predicted negative: toward positive the map is [0.3, -0.2, -0.1], rank 3
            interpretation(['terribly', 'good', 'y'], [-0.3, 0.2, 0.1], 0)]
    for normalization in ('total', 'per-sign', 'half-scale'):
        assert paper_analyses.mean_terribly_rank(maps, paraphrases, 1, normalization) == 2.0


def test_normalizations_table_puts_all_three_side_by_side(tmp_path, monkeypatch):
    splits = types.SimpleNamespace(test=[(['a', 'b', 'c'], 1)], dev=[(['a', 'great', 'film'], 1)])
    cli_helpers.write_weights(tmp_path / 'best_model.npz', b'weights')
    setup = types.SimpleNamespace(label_names=['negative', 'positive'], splits=splits,
                                  result_dir=str(tmp_path), config=RunConfig.from_json(
                                      json.loads(args_json(dataset='stsa.binary', epoch=1))))
    monkeypatch.setattr(paper_results, 'load_run',
                        lambda args, needs_temperature=False, check=None: (setup, None))
    # Test sentence: [0.9, 0.06, -0.04] highlights 2 (total), 3 (per-sign), 2 (half-scale);
    # each paraphrase 'a terribly X film' has 'terribly' as its most negative word.
    scores = {3: [0.9, 0.06, -0.04], 4: [0.1, -0.5, 0.3, 0.2]}

    def interpret_all(setup, methods, examples, dknn, batchsize):
        return {m: [interpretation(tokens, scores[len(tokens)], 1) for tokens, _ in examples]
                for m in methods}

    monkeypatch.setattr(paper_analyses.saliency, 'interpret_all', interpret_all)
    (tmp_path / 'sst').mkdir()
    (tmp_path / 'sst' / 'args.json').write_text('{}')     # the run is there (faked above)
    paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path), 'normalizations',
                        '--run', 'sst'])
    text = (tmp_path / 'normalization_sst.md').read_text()
    assert 'Produced by: `python' in text and '3 dev paraphrases' in text
    digest = cli_helpers.weights_digest(b'weights')
    assert 'parameters sha256 {}'.format(digest) in text     # the weights the table read
    rows = {r['method']: r for r in csv.DictReader(open(tmp_path / 'normalization_sst.csv'))}
    assert list(rows) == ['gradient', 'confidence', 'calibrated', 'conformity']
    gradient = rows['gradient']
    assert (gradient['highlighted_total'], gradient['highlighted_per-sign'],
            gradient['highlighted_half-scale']) == ('2.0', '3.0', '2.0')
    assert {gradient['terribly_rank_' + n] for n in ('total', 'per-sign', 'half-scale')} == {'1.0'}
    assert (gradient['paper_highlighted'], gradient['paper_terribly_rank']) == ('5.32', '1.1')
    assert rows['calibrated']['paper_highlighted'] == ''


def training_folder(results, name, weights, **values):
    folder = results / name
    folder.mkdir(parents=True)
    (folder / 'args.json').write_text(args_json(**{'vocab': 'pretrained', **values}))
    cli_helpers.write_weights(folder / 'best_model.npz', weights)
    (folder / 'train_result.json').write_text(json.dumps(
        {'dev_accuracy': 0.875, 'test_accuracy': 0.9}))
    (folder / 'log').write_text(json.dumps([{'epoch': 4, 'elapsed_time': 10.0}]))
    (folder / 'time.txt').write_text('peak_rss_kb 204800 wall_s 12.5\n')


def test_training_table_names_each_run_and_its_weights_and_keeps_runs_trained_elsewhere(
        tmp_path):
    results, out = tmp_path / 'results', tmp_path / 'out'
    training_folder(results, 'TREC_cnn', b'cnn weights', epoch=4)
    training_folder(results, 'TREC_cnn_seed1', b'seed weights', epoch=4, seed=1)
    out.mkdir()
    # An earlier table without the run and model_sha256 columns: runs read off the commands.
    (out / 'training.csv').write_text('\n'.join([
        'dataset,model,dev,test,epochs,seconds_per_epoch,peak_memory_mb,command',
        'TREC,cnn,10.0,10.0,4,1.0,100,scripts/train_and_dknn.sh TREC cnn --epoch 4',  # stale
        'subj,bilstm,93.9,93.7,10,202.0,,scripts/train_and_dknn.sh subj bilstm --epoch 10',
        'TREC,cnn,86.8,89.8,30,1.9,121,RUN=TREC_cnn_trainvocab scripts/train_and_dknn.sh '
        'TREC cnn --vocab train']) + '\n')
    paper_results.main(['--results', str(results), '--out', str(out), '--overwrite',
                        'training'])
    with open(out / 'training.csv') as f:
        rows = {row['run']: row for row in csv.DictReader(f)}
    assert list(rows) == ['TREC_cnn', 'TREC_cnn_seed1', 'TREC_cnn_trainvocab', 'subj_bilstm']
    fresh = rows['TREC_cnn']
    assert fresh['model_sha256'] == cli_helpers.weights_digest(b'cnn weights')
    assert (fresh['dev'], fresh['test'], fresh['seconds_per_epoch'],
            fresh['peak_memory_mb']) == ('87.5', '90.0', '2.5', '200')
    assert rows['TREC_cnn_seed1']['model_sha256'] == cli_helpers.weights_digest(b'seed weights')
    assert rows['TREC_cnn_seed1']['command'] == (
        'RUN=TREC_cnn_seed1 scripts/train_and_dknn.sh TREC cnn --epoch 4 --seed 1')
    assert rows['subj_bilstm']['model_sha256'] == 'not recorded'
    assert (rows['subj_bilstm']['test'], rows['subj_bilstm']['peak_memory_mb']) == ('93.7', '')
    text = (out / 'training.md').read_text()
    assert '2 runs kept from the previous training.csv' in text
    assert 'TREC_cnn_trainvocab, subj_bilstm.' in text and '2 of them were tabled' in text
    assert '| subj | bilstm | subj_bilstm | 93.9 | 93.7 | 10 | 202.0 | not run | not recorded |' in text
    # Rerun on its own output: the carried rows stay as they are, now with a run column.
    paper_results.main(['--results', str(results), '--out', str(out), '--overwrite',
                        'training'])
    with open(out / 'training.csv') as f:
        assert {row['run']: row for row in csv.DictReader(f)} == rows


def test_training_table_rejects_an_unreadable_earlier_row(tmp_path):
    (tmp_path / 'training.csv').write_text('dataset,model,command\nTREC,cnn,python train.py\n')
    with pytest.raises(UserError, match=r'training.csv line 2: unreadable training row'):
        training_table.carried_rows(str(tmp_path / 'training.csv'), [], SCRIPT)


def test_rerun_command_names_every_changed_setting():
    config = RunConfig.from_json(json.loads(args_json(
        dataset='cad-snli-augmented', model='bilstm', epoch=30, seed=777, vocab='pretrained',
        layer=1, n_calib=833, unit=300, dev_file='/data/snli_1.0/snli_1.0_dev.jsonl')))
    assert training_table.rerun_command('results/cad-snli-augmented_bilstm', config, SCRIPT) == (
        'scripts/train_and_dknn.sh cad-snli-augmented bilstm --layer 1 --n-calib 833'
        ' --dev-file .../snli_1.0_dev.jsonl')
    old_run = RunConfig.from_json(json.loads(args_json(epoch=5, seed=1)))   # before --vocab
    assert training_table.rerun_command('results/TREC_cnn_x', old_run, SCRIPT) == (
        'RUN=TREC_cnn_x scripts/train_and_dknn.sh TREC cnn --epoch 5 --seed 1 --vocab train')
    # A transformer's units, layers and dropout are its checkpoint's: never shown as flags.
    minilm = RunConfig.from_json(json.loads(args_json(
        dataset='stsa.binary', model='minilm', epoch=3, batchsize=32, lr=3e-5, unit=384,
        layer=6, dropout=0.1, vocab='pretrained')))
    assert training_table.rerun_command('results/stsa.binary_minilm', minilm, SCRIPT) == (
        'scripts/train_and_dknn.sh stsa.binary minilm')
    assert training_table.rerun_command('results/stsa.binary_minilm', minilm.replace(
        epoch=5, lr=2e-5), SCRIPT).endswith('minilm --epoch 5 --lr 2e-05')


def test_faithfulness_summary_gives_each_difference_its_verdict(tmp_path):
    # comprehensiveness up and deletion down: more faithful; sufficiency up: less;
    # insertion's interval holds 0: inside the spread.
    assert verdict({
        'aopc_comp': (0.1, 0.05, 0.15), 'aopc_suff': (0.1, 0.05, 0.15),
        'deletion_auc': (-0.1, -0.2, -0.05), 'insertion_auc': (0.0, -0.1, 0.1)},
        faithfulness_report.HIGHER_IS_BETTER) == \
        'more faithful on 2, less on 1, inside the spread on 1'
    lines = ['section,classifier,method,baseline,measure,mean,low,high,n,excludes_zero',
             'measure,softmax,conformity,,aopc_comp,0.3,0.2,0.4,7,']
    lines += ['difference,softmax,conformity,confidence,{},{},{},{},7,True'.format(m, *v)
              for m, v in (('aopc_comp', (-0.2, -0.3, -0.1)), ('aopc_suff', (0.2, 0.1, 0.3)),
                           ('deletion_auc', (0.2, 0.1, 0.3)),
                           ('insertion_auc', (-0.2, -0.3, -0.1)))]
    (tmp_path / 'faithfulness_cnn_test.csv').write_text('\n'.join(lines) + '\n')
    paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path),
                        'faithfulness-summary', '--runs', 'cnn'])
    with open(tmp_path / 'faithfulness_summary_test.csv') as f:
        row, = csv.DictReader(f)
    assert (row['f'], row['difference'], row['n']) == ('softmax', 'conformity - confidence', '7')
    assert row['aopc_comp'] == '-0.200 [-0.300, -0.100]' and row['verdict'] == 'less on 4'


def test_conformity_ranks_higher_counts_smaller_ranks_and_ties():
    rows = [{'conformity': 1.0, 'confidence': 2.0}, {'conformity': 3.0, 'confidence': 2.0},
            {'conformity': 1.0, 'confidence': 1.0}, {'conformity': None, 'confidence': 4.0}]
    assert paper_analyses.conformity_ranks_higher(rows) == '1 of 3 words (1 tie)'
    paper = [{'paper_conformity': c, 'paper_confidence': f}
             for words in paper_numbers.ARTIFACTS.values() for c, f in words.values()]
    assert paper_analyses.conformity_ranks_higher(
        paper, 'paper_conformity', 'paper_confidence') == '14 of 15 words (1 tie)'


def test_faithfulness_summary_names_a_file_that_is_not_a_faithfulness_table(tmp_path):
    (tmp_path / 'faithfulness_cnn_test.csv').write_text('a,b\n1,2\n')
    with pytest.raises(UserError, match='faithfulness_cnn_test.csv is not a faithfulness table'):
        paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path),
                            'faithfulness-summary', '--runs', 'cnn'])


def faithfulness_csv(path, measures):
    """A faithfulness CSV whose only paired differences are conformity - confidence
    under the softmax on `measures`, each -0.2 [-0.3, -0.1]."""
    lines = ['section,classifier,method,baseline,measure,mean,low,high,n,excludes_zero',
             'measure,softmax,conformity,,aopc_comp,0.3,0.2,0.4,7,']
    lines += ['difference,softmax,conformity,confidence,{},-0.2,-0.3,-0.1,7,True'.format(m)
              for m in measures]
    path.write_text('\n'.join(lines) + '\n')


def test_faithfulness_summary_refuses_a_run_without_paired_differences(tmp_path):
    faithfulness_csv(tmp_path / 'faithfulness_a_test.csv', ['aopc_comp'])
    faithfulness_csv(tmp_path / 'faithfulness_b_test.csv', [])   # measures only
    with pytest.raises(UserError, match='faithfulness_b_test.csv has no paired difference.*'
                                        'faithfulness --run b'):
        paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path),
                            'faithfulness-summary', '--runs', 'a,b'])
    assert not (tmp_path / 'faithfulness_summary_test.csv').exists()


def test_faithfulness_summary_of_a_run_without_curves_marks_the_missing_measures(tmp_path):
    faithfulness_csv(tmp_path / 'faithfulness_a_test.csv', ['aopc_comp', 'aopc_suff'])
    paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path),
                        'faithfulness-summary', '--runs', 'a'])
    with open(tmp_path / 'faithfulness_summary_test.csv') as f:
        row, = csv.DictReader(f)
    assert row['deletion_auc'] == row['insertion_auc'] == faithfulness_report.NOT_MEASURED
    assert row['aopc_suff'] == '-0.200 [-0.300, -0.100]'
    assert row['verdict'] == 'more faithful on 1, less on 1'   # of the two measured


def test_faithfulness_seed_out_of_range_is_a_flag_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        paper_results.main(['--results', str(tmp_path), 'faithfulness', '--seed', '-1'])
    assert stop.value.code == 2 and '--seed' in capsys.readouterr().err
