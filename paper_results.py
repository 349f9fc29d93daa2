"""Collect trained result folders into the paper's tables and figures under results/.

    python paper_results.py table1        # results/wallace/table1.md and .csv
    python paper_results.py training      # results/wallace/training.md and .csv
    python paper_results.py reliability --run stsa.binary_cnn   # results/wallace/reliability_*.png
    python paper_results.py table2|highlights|terribly --run stsa.binary_bilstm \
        [--normalization total|per-sign|half-scale]
    python paper_results.py normalizations --run stsa.binary_cnn   # all three, one table
    python paper_results.py snli-artifacts --run snli_bilstm
    python paper_results.py entropy --runs stsa.binary_cnn,snli_cnn [--limit 300]
    python paper_results.py faithfulness --run stsa.binary_cnn [--split test --limit 200]
    python paper_results.py faithfulness-summary --runs stsa.binary_cnn,stsa.binary_minilm
    python paper_results.py plausibility --run stsa.binary_cnn [--limit 300 --thresholds 0.5,1]
    python paper_results.py plausibility-summary --runs stsa.binary_cnn,stsa.binary_bilstm

Each output names the command that produced it; the runs themselves come from
scripts/train_and_dknn.sh (see docs/reproducing.md). Without --out the outputs go to the
subcommand's study folder: results/wallace, results/feng (entropy) or results/faithfulness
(faithfulness and plausibility).
"""
import argparse
import csv
import functools
import os

import numpy as np

from deepknn import cli
from deepknn.neighbors import dknn_evaluation
from deepknn.faithfulness import runs as faithfulness_runs
from deepknn.feng import input_reduction
from deepknn.feng import measures
from deepknn.models import model_setup
from deepknn.plausibility import measures as plausibility_lib
from deepknn.plausibility import runs as plausibility_runs
from deepknn.models import pretrained
from deepknn.neighbors import trained_run
from deepknn.data import sst_trees
import nets
import nlp_utils
import text_datasets
from deepknn.faithfulness import report as faithfulness_report
from deepknn.reports import paper_analyses
from deepknn.reports import paper_numbers
from deepknn.plausibility import report as plausibility_report
from deepknn.reports import plots
from deepknn.reports import table1 as table1_report
from deepknn.reports import tables
from deepknn.reports import training_table
from deepknn.interpret import saliency
from deepknn.interpret import saliency_scores
from deepknn.evaluation import calibration
from deepknn.reports.tables import markdown_table, write_table
from nlp_utils import UserError

def table1(args):
    rows = table1_report.table1_rows(args.results)
    carried = table1_report.carried_rows(args.stem + '_runs.csv', rows)
    rows = table1_report.with_carried(rows, carried)
    if all(row['dknn'] is None for row in rows):
        raise UserError('no result folder under {} has a DkNN test report for Table 1; run '
                        'scripts/train_and_dknn.sh DATASET MODEL first'.format(args.results))
    produced, note = cli.provenance(), tables.carried_note(carried, 'table1_runs.csv',
                                                          args.results)
    columns = ['model', 'dataset', 'vocab', 'softmax', 'softmax_sd', 'dknn', 'dknn_sd',
               'difference', 'dev_softmax', 'dev_dknn', 'paper_softmax', 'paper_dknn', 'seeds',
               'epochs', 'backend']
    header = ('# Table 1: softmax vs DkNN test accuracy (%)\n\nOurs: CNN and BiLSTM on GloVe 6B '
              '50d, MiniLM fine-tuned from all-MiniLM-L6-v2 (3 epochs), this 2-core CPU, epoch '
              'chosen on dev; mean (and standard deviation, *_sd) over the seeds run, dev '
              'accuracy beside test; vocab: `pretrained` keeps every word with a GloVe vector '
              '(Kim 2014; MiniLM: its word pieces), `train` only training words. Paper: GloVe '
              '840B 300d, one run, no transformer. SNLI: the paper trains on the train split '
              '(its accuracy is from section 4, BiLSTM only); that split is not offline, so ours '
              'trains on SNLI dev and tests on SNLI test. Caveat: {}. Every run: '
              '[table1_runs.md](table1_runs.md).\n{}{}\n'.format(pretrained.NLI_CAVEAT, note, produced))
    summary = table1_report.table1_summary(rows)
    write_table(args.stem, summary, columns, header)
    run_columns = ['model', 'dataset', 'run', 'seed', 'vocab', 'softmax', 'dknn', 'difference',
                   'dev_softmax', 'dev_dknn', 'epochs', 'backend', 'k', 'model_sha256']
    write_table(args.stem + '_runs', rows, run_columns,
                '# Table 1, every run (%)\n\n{}\n{}{}\n'.format(tables.MODEL_SHA256_NOTE, note,
                                                           produced))
    print(markdown_table(summary, columns))


TRAINING_SCRIPT = 'scripts/train_and_dknn.sh'   # the training table's rerun commands call it


def training(args):
    rows, carried = training_table.training_rows(args.results, args.stem + '.csv',
                                                 TRAINING_SCRIPT)
    if not rows:
        raise UserError('no result folder under {} has a train_result.json; train with '
                        '{} DATASET MODEL first'.format(args.results, TRAINING_SCRIPT))
    header = ('# Training runs on this 2-core CPU (accuracy in %)\n\nCNN and BiLSTM on GloVe 6B '
              '50d; MiniLM fine-tuned from all-MiniLM-L6-v2. '
              'Runs shared the 2 cores with other jobs part of the time, so seconds per '
              'epoch vary by up to 2x between runs. {}\n{}{}\n'.format(
                  tables.MODEL_SHA256_NOTE, tables.carried_note(carried, 'training.csv',
                                                                args.results),
                  cli.provenance()))
    write_table(args.stem, rows, training_table.COLUMNS, header)
    print(markdown_table(rows, training_table.COLUMNS))


SNLI_PROXY_FLAGS = (' --train-file ../shared/data/snli_1.0/snli_1.0_dev.jsonl'
                    ' --test-file ../shared/data/snli_1.0/snli_1.0_test.jsonl')


def check_run_exists(args):
    """The folder of --run under --results, or a UserError naming it and the command
    that makes it."""
    folder = os.path.join(args.results, args.run)
    if os.path.exists(os.path.join(folder, 'args.json')):
        return folder
    dataset, _, model = args.run.rpartition('_')
    how = 'RUN=NAME scripts/train_and_dknn.sh DATASET MODEL'
    if dataset in text_datasets.DATASETS and model in nets.MODELS:
        how = 'scripts/train_and_dknn.sh {} {}{}'.format(
            dataset, model, SNLI_PROXY_FLAGS if dataset == 'snli' else '')
    raise UserError('{} holds no trained run; make it with `{}` (or pass --run of one that '
                    'exists)'.format(folder, how))


def load_run(args, needs_temperature=False, check=None):
    """(setup, DkNN) of --run with the DkNN its flags ask for; `check(setup)` and a
    missing temperature.json fail before the slow DkNN build (trained_run.load_run)."""
    folder = check_run_exists(args)
    return trained_run.load_run(folder, cli.dknn_settings(args, folder), needs_temperature, check)


def analysis(args):
    """table2, highlights, terribly, normalizations or snli-artifacts on --run."""
    function, methods, binary = paper_analyses.ANALYSES[args.command]
    check = functools.partial(paper_analyses.check_binary_sentiment,
                              positive_label=args.positive_label) if binary else None
    setup, dknn = load_run(args, saliency.needs_temperature(methods), check)
    function(paper_analyses.Analysis(
        setup, dknn, analysis_stem(args), args.produced_by, args.batchsize,
        getattr(args, 'normalization', saliency_scores.DEFAULT_NORMALIZATION),
        args.positive_label, getattr(args, 'limit', None)))


def analysis_stem(args):
    """--out/--name of an analysis (default <output>_<run>, OUTPUTS), with a
    --normalization other than the default appended where the analysis takes one."""
    normalization = getattr(args, 'normalization', saliency_scores.DEFAULT_NORMALIZATION)
    suffix = '' if normalization == saliency_scores.DEFAULT_NORMALIZATION else '_' + normalization
    return args.stem + suffix


def reliability(args):
    path = os.path.join(args.results, args.run, dknn_evaluation.output_names('test', args.backend)[1])
    if not os.path.exists(path):
        raise UserError('{} does not exist; run run_dknn.py --model-setup {}/args.json '
                        '--backend {} first'.format(path, os.path.dirname(path), args.backend))
    predictions = nlp_utils.read_npz_arrays(
        path, ['label', 'softmax_probability', 'credibility', 'prediction'], 'DkNN predictions',
        'run run_dknn.py --model-setup {}/args.json again'.format(os.path.dirname(path)))
    labels, probabilities = predictions['label'], predictions['softmax_probability']
    curves = [calibration.reliability_curve('DkNN credibility', predictions['credibility'],
                                            predictions['prediction'] == labels),
              calibration.reliability_curve('softmax confidence', probabilities.max(axis=1),
                                            probabilities.argmax(axis=1) == labels)]
    output = args.stem + '.png'
    plots.save_figure(plots.reliability_figure(curves, '{} (test set)'.format(args.run)), output)
    print('wrote', output)


def run_names(text):
    """The result folder names of a comma-separated --runs value."""
    runs = [name.strip() for name in text.split(',') if name.strip()]
    if not runs:
        raise UserError('--runs names no run; pass comma-separated result folder names')
    return runs


def entropy(args):
    """Feng et al.'s Table 2 layout: each run before / after entropy fine-tuning"""
    input_reduction.check_beam(args.beam)
    rows, models = [], []
    for run in run_names(args.runs):
        folders = [os.path.join(args.results, name) for name in (run, run + args.suffix)]
        missing = [f for f in folders if not os.path.exists(os.path.join(f, 'args.json'))]
        if missing:
            raise UserError('{} has no args.json; train the run and fine-tune it with '
                            'finetune_entropy.py first'.format(missing[0]))
        setups = [model_setup.load_setup(f) for f in folders]
        models += map(model_setup.run_description, setups)
        before, after = (measures.cached_measure(setup, measures.MeasureSettings(
            args.beam, args.limit, cli.dknn_settings(args, setup.result_dir)))
            for setup in setups)
        rows.append(measures.table_row(run, before, after))
    header = ('# Entropy regularisation (Feng et al. 2018, Table 2 layout): before / after '
              'fine-tuning\n\nAccuracy in %. Reduced length: mean words after input reduction '
              '(gradient, beam {}) of the first {} dev examples; highlights: mean highlighted '
              'words of the first {} test sentences; DkNN: k={}, {}. Paper (SNLI, BIMPM): '
              'accuracy {} -> {}, reduced length {} -> {}.\n{}\n{}\n'.format(
                  args.beam, args.limit, args.limit, args.k, args.backend,
                  *paper_numbers.ENTROPY['accuracy'], *paper_numbers.ENTROPY['reduced_length'],
                  model_setup.models_line(models), cli.provenance()))
    write_table(args.stem, rows, list(rows[0]), header)
    print('wrote', args.stem + '.md')


def add_entropy_command(commands):
    command = commands.add_parser('entropy', help=entropy.__doc__.split('\n')[0])
    cli.add_runs(command)
    command.add_argument('--suffix', default='_entropy',
                         help='the fine-tuned folder of run R is R + SUFFIX')
    cli.add_limit(command, 300, 'dev examples to reduce and test examples to interpret')
    command.add_argument('--beam', type=int, default=input_reduction.DEFAULT_BEAM,
                         help='maximum beam size k (beam max(1, min(k, L - 3)))')
    cli.add_dknn(command)
    cli.add_batchsize(command, 256, 'rows per model batch')
    cli.add_engine(command)
    cli.add_name(command, 'entropy_regularization')   # table, not the fine-tuned runs


def faithfulness(args):
    """Faithfulness of every interpretation method under softmax, DkNN conformity and credibility

    ERASER comprehensiveness/sufficiency, AOPC and deletion/insertion areas of each
    method's ranking (and the random and reversed baselines) with bootstrap intervals,
    paired differences, and the methods' Kendall agreement (faithfulness/trained_run.py)."""
    methods = args.methods or saliency.STUDY_METHODS
    # Only a method nobody named may be left out (calibrated without temperature.json).
    optional = () if args.methods else methods
    planned = {}     # the method plan, made before the slow DkNN build
    setup, dknn = load_run(args, check=lambda setup: planned.setdefault(
        'plan', saliency.plan_methods(methods, setup.result_dir, optional, '--methods')))
    examples = getattr(setup.splits, args.split)[:args.limit]
    if not examples:
        raise UserError('the {} split of {} is empty; pass another --split'.format(
            args.split, args.run))
    run = faithfulness_runs.run_faithfulness(setup, examples, dknn, planned['plan'],
                                             batchsize=args.batchsize, curves=args.curves,
                                             seed=args.seed, optional=optional)
    summaries = faithfulness_runs.summarize(run, seed=args.seed)
    differences = faithfulness_runs.paired_differences(run, seed=args.seed)
    stem = args.stem
    title = 'Faithfulness of the interpretation methods: {}, first {} {} sentences'.format(
        args.run, len(examples), args.split)
    header = ('# {}\n\nModel: {} {} ({} epochs), {}. DkNN: k={}, {}. Random baseline seed '
              '{}.\n{}\n'.format(title, setup.config.dataset, setup.config.model,
                                 setup.config.epoch, model_setup.run_description(setup), args.k,
                                 args.backend, args.seed, cli.provenance()))
    nlp_utils.atomic_write_files(plots.report_writes(
        faithfulness_report, run, summaries, differences, stem, header, title))
    print('wrote {0}.md, {0}.csv and {0}.png'.format(stem))


def summary_rows_of(path, run):
    """faithfulness_report.summary_rows of one run's faithfulness CSV; a UserError naming
    the file when it is not such a table or holds no paired difference."""
    remake = 'python paper_results.py --overwrite faithfulness --run {}'.format(run)
    try:
        with open(path, newline='', encoding='utf-8') as f:
            rows = faithfulness_report.summary_rows(run, csv.DictReader(f))
    except (KeyError, ValueError, TypeError) as error:
        raise UserError('{} is not a faithfulness table ({}: {}); remake it with {}'.format(
            path, type(error).__name__, error, remake))
    if not rows:
        raise UserError('{} has no paired difference ({}) to summarize; remake it with {} '
                        'and --methods including {}'.format(
                            path, ', '.join('{} - {}'.format(*pair) for pair in
                                            saliency.STUDY_PAIRS), remake,
                            ','.join(sorted({m for pair in saliency.STUDY_PAIRS
                                             for m in pair}))))
    return rows


def faithfulness_summary(args):
    """Conformity leave-one-out against confidence and gradient, across runs, per classifier

    Reads each run's faithfulness CSV (the faithfulness command) and writes one row per
    run, classifier and paired difference, with the verdict of its four measures."""
    rows = []
    for run in run_names(args.runs):
        path = os.path.join(args.out, 'faithfulness_{}_{}.csv'.format(run, args.split))
        if not os.path.exists(path):
            raise UserError('{} does not exist; make it with python paper_results.py '
                            'faithfulness --run {} --split {}'.format(path, run, args.split))
        rows += summary_rows_of(path, run)
    header = ('# Faithfulness across models: conformity leave-one-out minus confidence '
              'leave-one-out and minus the gradient\n\nEach cell: the paired difference of '
              'the two methods on the same {} sentences, mean [95% bootstrap interval]; '
              'verdict: on how many of the four measures conformity is more (less) faithful '
              'beyond the interval (higher comprehensiveness and insertion area, lower '
              'sufficiency and deletion area are better). Per run: '
              'faithfulness_RUN_{}.md.\n{}\n'.format(args.split, args.split, cli.provenance()))
    write_table(args.stem, rows,
                faithfulness_report.SUMMARY_COLUMNS, header)
    print(markdown_table(rows, faithfulness_report.SUMMARY_COLUMNS))


def add_summary_parser(commands, name, function):
    """The subcommand NAME (e.g. faithfulness-summary) over the runs its measure
    (faithfulness) was run on."""
    summary = commands.add_parser(name, help=function.__doc__.split('\n')[0])
    cli.add_runs(summary, 'comma-separated result folder names measured by ' +
                 name.split('-')[0])
    cli.add_name(summary, OUTPUTS[name][0].replace('{split}', 'SPLIT'))
    return summary


def add_faithfulness_command(commands):
    command = commands.add_parser('faithfulness', help=faithfulness.__doc__.split('\n')[0])
    cli.add_name(command, 'faithfulness_RUN_SPLIT')
    command.add_argument('--run', default='stsa.binary_cnn', help='result folder name')
    cli.add_split(command, help='the sentences measured')
    cli.add_limit(command, 200, 'the first N sentences of the split')
    cli.add_methods(command, saliency, help='comma-separated interpretation methods (default: '
                    '{}; there calibrated is left out with a note when the run has no '
                    'temperature.json, named here it needs one)'.format(
                        ','.join(saliency.STUDY_METHODS)))
    cli.add_dknn(command)
    cli.add_batchsize(command, 256, 'rows per model batch')
    cli.add_engine(command)
    command.add_argument('--curves', action=argparse.BooleanOptionalAction, default=True,
                         help='deletion and insertion curves (a model row per word per '
                              'sentence and ranking); --no-curves measures only the bins')
    cli.add_seed(command, help='seed of the random baseline and the bootstrap')
    summary = add_summary_parser(commands, 'faithfulness-summary', faithfulness_summary)
    cli.add_split(summary, help='the split they were measured on')


def plausibility(args):
    """Plausibility of every interpretation method against SST's human word and phrase labels

    ERASER's AUPRC, top-k token and IOU F1 and the rank correlation of each method's map
    (and a seeded random one) with the treebank's rationales, the extraneous words of
    section 5.1, bootstrap intervals and paired differences (plausibility/trained_run.py)."""
    methods = args.methods     # checked as the flags were read
    found = {}

    def read_trees(setup):    # before the slow DkNN build
        plausibility_runs.check_binary(setup)
        found['trees'] = sst_trees.read_trees(args.trees or sst_trees.default_trees_path(
            'test', setup.config.data_dir))
    setup, dknn = load_run(args, check=read_trees)
    examples = setup.splits.test[:args.limit]
    run = plausibility_runs.run_plausibility(setup, examples, found['trees'], dknn, methods,
                                             args.thresholds, args.batchsize, args.seed)
    stem = args.stem
    title = 'Plausibility against SST human rationales: {}, first {} test sentences'.format(
        args.run, len(examples))
    header = '# {}\n\nModel: {} {} ({} epochs), {}. DkNN: k={}, {}. Random seed {}.\n{}\n'.format(
        title, setup.config.dataset, setup.config.model, setup.config.epoch,
        model_setup.run_description(setup), args.k, args.backend, args.seed, cli.provenance())
    nlp_utils.atomic_write_files(plots.report_writes(
        plausibility_report, run, plausibility_runs.summarize(run, seed=args.seed),
        plausibility_runs.paired_differences(run, seed=args.seed), stem, header, title))
    print('wrote {0}.md, {0}.csv and {0}.png'.format(stem))


def thresholds(text):
    """argparse type: comma-separated rationale thresholds in (0, 1]."""
    try:
        return plausibility_lib.check_thresholds([float(v) for v in text.split(',') if v.strip()])
    except (ValueError, UserError) as error:
        raise argparse.ArgumentTypeError('must be comma-separated numbers in (0, 1], got {!r} '
                                         '({})'.format(text, error))


def plausibility_summary(args):
    """Conformity against confidence and gradient across runs; plausibility against faithfulness"""
    summary = plausibility_report.gather_summary(args.out, run_names(args.runs),
                                                 args.thresholds)
    header = plausibility_report.summary_header(args.thresholds, summary.weights,
                                                cli.provenance())
    stem = args.stem
    writes = tables.table_writes(stem, summary.rows, summary.columns, header)
    if summary.points:
        writes.append(plots.figure_write(plausibility_report.plausibility_vs_faithfulness(
            summary.points, args.thresholds[0]), stem + '.png'))
    nlp_utils.atomic_write_files(writes)
    print(markdown_table(summary.rows, summary.columns))


def add_plausibility_commands(commands):
    command = commands.add_parser('plausibility', help=plausibility.__doc__.split('\n')[0])
    cli.add_name(command, 'plausibility_RUN')
    command.add_argument('--run', default='stsa.binary_cnn', help='result folder name')
    cli.add_limit(command, help='the first N test sentences (default: all)')
    default_thresholds = ','.join('{:g}'.format(t) for t in plausibility_lib.DEFAULT_THRESHOLDS)
    command.add_argument('--thresholds', type=thresholds, default=default_thresholds,
                         help='comma-separated rationale thresholds on the phrase polarity '
                              '(0.5: every explanatory phrase, 1: very polar ones); the first '
                              'is the headline')
    command.add_argument('--trees', default=None,
                         help='the SST test trees (default: DATA_DIR/sst-trees/test.txt)')
    cli.add_methods(command, saliency, saliency.STUDY_METHODS)
    cli.add_dknn(command)
    cli.add_batchsize(command, 256, 'rows per model batch')
    cli.add_engine(command)
    cli.add_seed(command, help='seed of the random baseline and the bootstrap')
    summary = add_summary_parser(commands, 'plausibility-summary', plausibility_summary)
    summary.add_argument('--thresholds', type=thresholds, default=default_thresholds,
                         help='the rationale thresholds tabled; the figure takes the first')


# Each subcommand's file stem in --out (--name replaces it where the subcommand has one;
# the section 5-6 analyses name theirs) and the suffixes of its outputs.
OUTPUTS = {'entropy': ('entropy_regularization', ('.md', '.csv')),
           'table1': ('table1', ('.md', '.csv', '_runs.md', '_runs.csv')),
           'training': ('training', ('.md', '.csv')),
           'reliability': ('reliability_{run}', ('.png',)),
           'table2': ('table2_{run}', ('.html', '.png', '.csv')),
           'highlights': ('highlights_{run}', ('.md', '.csv')),
           'terribly': ('terribly_{run}', ('.md', '.csv')),
           'normalizations': ('normalization_{run}', ('.md', '.csv')),
           'snli-artifacts': ('snli_artifacts_{run}', ('.md', '.csv')),
           'faithfulness': ('faithfulness_{run}_{split}', ('.md', '.csv', '.png')),
           'faithfulness-summary': ('faithfulness_summary_{split}', ('.md', '.csv')),
           'plausibility': ('plausibility_{run}', ('.md', '.csv', '.png')),
           'plausibility-summary': ('plausibility_summary', ('.md', '.csv', '.png'))}


# The study folder each subcommand writes into without --out (results/README.md).
STUDY_FOLDERS = {**dict.fromkeys(['table1', 'training', 'reliability', 'table2', 'highlights',
                                  'terribly', 'normalizations', 'snli-artifacts'], cli.WALLACE),
                 'entropy': cli.FENG,
                 **dict.fromkeys(['faithfulness', 'faithfulness-summary', 'plausibility',
                                  'plausibility-summary'], cli.FAITHFULNESS)}


def output_stem(args):
    """DIR/STEM of the subcommand's outputs: --out (default: its study folder) and
    --name, else the subcommand's own stem."""
    name, _ = OUTPUTS[args.command]
    return cli.output_stem(args, STUDY_FOLDERS[args.command], name.format(
        run=getattr(args, 'run', ''), split=getattr(args, 'split', '')))


def check_overwrite(args, stem):
    """The committed tables of a study folder are only replaced on request: without an
    explicit --out, an existing output file needs --overwrite."""
    cli.check_table_outputs(args.out, args.overwrite,
                            [stem + suffix for suffix in OUTPUTS[args.command][1]])


def main(argv=None):
    parser = cli.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--results', default='results', help='folder of the result folders')
    cli.add_table_output(parser)
    commands = parser.add_subparsers(dest='command', required=True)
    for name, what in (('table1', 'softmax vs DkNN accuracy (Table 1)'),
                       ('training', 'accuracy, seconds per epoch and memory of each run')):
        cli.add_name(commands.add_parser(name, help=what), name)
    figure = commands.add_parser('reliability', help='reliability diagram of one run')
    cli.add_name(figure, 'reliability_RUN')
    figure.add_argument('--run', default='stsa.binary_cnn', help='result folder name')
    cli.add_backend(figure, help='the DkNN run whose test predictions are drawn')
    for name, (function, _, _) in paper_analyses.ANALYSES.items():
        command = commands.add_parser(name, help=function.__doc__.split('\n')[0])
        cli.add_name(command, OUTPUTS[name][0].replace('{run}', 'RUN'))
        command.add_argument('--run', default='snli_bilstm' if name == 'snli-artifacts'
                             else 'stsa.binary_bilstm', help='result folder name')
        cli.add_backend(command, help='DkNN search backend')
        cli.add_k(command)
        cli.add_batchsize(command, 256, 'leave-one-out rows per model batch')
        cli.add_engine(command)
        command.add_argument('--positive-label', default='positive',
                             help='name of the positive class (terribly)')
        if name == 'highlights':
            cli.add_limit(command, help='only the first N test sentences (default: all; the '
                          'whole SST test set takes minutes)')
        if name in ('table2', 'highlights', 'terribly'):
            command.add_argument('--normalization', choices=sorted(saliency_scores.NORMALIZATIONS),
                                 default=saliency_scores.DEFAULT_NORMALIZATION,
                                 help="how maps are scaled: 'total' (the paper's wording, "
                                      "default), 'per-sign' or 'half-scale' (the authors' code)")
    add_entropy_command(commands)
    add_faithfulness_command(commands)
    add_plausibility_commands(commands)
    cli.add_table_output_after_subcommands(parser)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.results):
        raise UserError('results folder {} does not exist; pass --results'.format(args.results))
    cli.check_output_folder(args.out, '--out')
    if getattr(args, 'run', None):      # the input before the outputs
        check_run_exists(args)
    args.stem = output_stem(args)
    check_overwrite(args, args.stem)
    args.out = args.out or STUDY_FOLDERS[args.command]
    args.produced_by = cli.provenance()
    commands_by_name = {'table1': table1, 'training': training, 'reliability': reliability,
                        'entropy': entropy, 'faithfulness': faithfulness,
                        'faithfulness-summary': faithfulness_summary,
                        'plausibility': plausibility, 'plausibility-summary': plausibility_summary}
    commands_by_name.update({name: analysis for name in paper_analyses.ANALYSES})
    commands_by_name[args.command](args)


if __name__ == '__main__':
    cli.run_cli(main)
