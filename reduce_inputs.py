"""Input reduction (Feng et al. 2018) on a trained model: reduced inputs, Figures 3-4, tables.

    python reduce_inputs.py --model-setup results/stsa.binary_cnn/args.json \
        --methods gradient,confidence,conformity --split dev [--limit N] [--beam 5]

Writes into --out (default results/feng/), with NAME (--name, default reduction_<run>_<split>):
per importance NAME_<importance> with .jsonl (original and reduced text, prediction, confidence and credibility before
and after), .html (side by side), _lengths.png (Figure 3) and _confidence.png (Figure
4); and the summary table NAME.md/.csv. The paper reduces the
validation split.
"""
import os
import time

from deepknn.reports import paper_numbers
from deepknn import cli
from deepknn.neighbors import dknn as dknn_lib
from deepknn.feng import input_reduction
from deepknn.models import model_setup
import nlp_utils
from deepknn.reports import reduction_report
from deepknn.storage import result_folder
from deepknn.interpret import leave_one_out
from deepknn.interpret import saliency
from nlp_utils import UserError
from deepknn.reports.tables import table_writes



def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_methods(parser, saliency, ('gradient',), 'comma-separated importances that rank '
                    'the words to remove', old_flag='--importance')
    cli.add_split(parser, 'dev', 'examples to reduce (the paper: dev)')
    cli.add_limit(parser, help='reduce only the first N examples')
    parser.add_argument('--beam', type=int, default=input_reduction.DEFAULT_BEAM,
                        help='maximum beam size k (the paper: 5)')
    parser.add_argument('--no-dknn', action='store_true',
                        help='skip DkNN credibility (conformity importance needs the DkNN)')
    cli.add_dknn(parser)
    cli.add_engine(parser)
    cli.add_batchsize(parser, leave_one_out.DEFAULT_BATCHSIZE, 'rows per model batch and DkNN query')
    cli.add_outputs(parser, cli.FENG, 'reduction_<run>_<split>')
    cli.add_device(parser)
    return parser.parse_args(argv)


def needs_dknn(setup, importances, no_dknn):
    """Whether to build the DkNN; a UserError when an importance that needs one
    (conformity, credibility) cannot have it."""
    has_calib = len(setup.splits.calib) > 0
    wanting = [name for name in importances if saliency.REGISTRY[name].needs_dknn]
    if wanting and (no_dknn or not has_calib):
        raise UserError('--methods {} needs the DkNN and its calibration split: '
                        '{}; use --methods gradient,confidence'.format(wanting[0],
                            'drop --no-dknn' if has_calib else
                            'this model was trained with --n-calib 0, re-train with '
                            '--n-calib 1000'))
    return has_calib and not no_dknn


def reduce_split(setup, plan, examples, dknn, args):
    """{importance: (reductions, before_after view, seconds)} of each method of the
    saliency.MethodPlan `plan`."""
    results = {}
    for importance in plan.methods:
        start = time.perf_counter()
        reducer = input_reduction.make_reducer(importance, setup, dknn, args.beam,
                                               args.batchsize, plan.temperature)
        reductions = reducer.reduce(examples, progress='reducing ({})'.format(importance))
        seconds = time.perf_counter() - start
        view = input_reduction.before_after(setup.model, setup.vocab, reductions, dknn,
                                            args.batchsize)
        results[importance] = (reductions, view, seconds)
    return results


def output_writes(setup, results, stem, split):
    """(path, write, mode) of each importance's records (JSON lines), page and figures."""
    run = os.path.basename(setup.result_dir)
    writes = []
    for importance, (reductions, view, _) in results.items():
        rows = reduction_report.records(reductions, view, setup.label_names, setup.vocab)
        name = '{} {} split, {} importance'.format(run, split, importance)
        page = reduction_report.html_page(rows, reductions, setup.vocab, 'Input reduction: ' + name)
        # Beside the page and figures of the same call, so a call with other settings
        # (--limit, --out) never replaces another's records.
        path = importance_stem(stem, importance)
        writes += [reduction_report.jsonl_write(path + '.jsonl', rows),
                   (path + '.html', lambda f, page=page: f.write(page), 'w'),
                   reduction_report.length_histogram(path + '_lengths.png', reductions, name),
                   reduction_report.confidence_density(path + '_confidence.png', view, name)]
    return writes


def importance_stem(stem, importance):
    return '{}_{}'.format(stem, importance)


def output_paths(stem, importances):
    """Every file this call writes: the table, and per importance (output_writes) the
    records, page and figures."""
    return [stem + suffix for suffix in ('.md', '.csv')] + [
        importance_stem(stem, importance) + suffix
        for importance in importances
        for suffix in ('.jsonl', '.html', '_lengths.png', '_confidence.png')]


def table_rows(setup, results, run):
    rows = []
    paper_length = paper_numbers.REDUCED_LENGTH.get(setup.config.dataset, '')
    for importance, (reductions, view, seconds) in results.items():
        stats = input_reduction.summarize(reductions, view)
        rows.append({'run': run, 'importance': importance, 'examples': stats['n_examples'],
                     'original_length': round(stats['mean_original_length'], 2),
                     'reduced_length': round(stats['mean_reduced_length'], 2),
                     'reduced_to_1_2_words': round(stats['fraction_1_2_words'], 3),
                     'confidence_before': round(stats['mean_confidence_before'], 3),
                     'confidence_after': round(stats['mean_confidence_after'], 3),
                     'credibility_before': _rounded(stats.get('mean_credibility_before')),
                     'credibility_after': _rounded(stats.get('mean_credibility_after')),
                     'paper_reduced_length': paper_length,
                     'seconds': round(seconds, 1)})
    return rows


def _rounded(value):
    return None if value is None else round(value, 3)


def output_stem(args, run):
    """DIR/STEM of the table; the importances' files are STEM_<importance>.*"""
    return cli.output_stem(args, cli.FENG, 'reduction_{}_{}'.format(run, args.split))


def main(argv=None):
    args = parse_args(argv)
    importances = args.methods
    input_reduction.check_beam(args.beam)      # before the slow loading
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    dknn_settings = cli.dknn_settings(args, setup.result_dir)   # checked before any work
    examples = cli.split_examples(setup, args.split)[:args.limit]
    plan = saliency.plan_methods(importances, setup.result_dir, argument='--methods')
    use_dknn = needs_dknn(setup, plan.methods, args.no_dknn)
    run = os.path.basename(setup.result_dir)
    stem = output_stem(args, run)
    cli.check_new_outputs([stem + '.md'], args.overwrite)   # after the inputs
    # Held until the outputs are written: a second call with the same outputs stops here,
    # and what a killed call left beside them is removed.
    with result_folder.lock_outputs(stem, output_paths(stem, importances), 'reduce_inputs.py'):
        cli.check_new_outputs([stem + '.md'], args.overwrite)
        reduce_and_write(args, setup, plan, examples, dknn_settings if use_dknn else None,
                         stem)


def reduce_and_write(args, setup, plan, examples, dknn_settings, stem):
    """Reduce `examples` with each importance of `plan`, with the DkNN of `dknn_settings`
    (None: without a DkNN); write the table, records, pages and figures under `stem`."""
    dknn = None if dknn_settings is None else dknn_lib.dknn_from_setup(setup, dknn_settings)
    results = reduce_split(setup, plan, examples, dknn, args)
    run = os.path.basename(setup.result_dir)
    rows = table_rows(setup, results, run)
    columns = list(rows[0])
    header = ('# Input reduction (Feng et al. 2018), {} split of {}\n\nMean lengths in words; '
              'confidence = softmax probability of the kept prediction; credibility = DkNN '
              '(k={}, {}). Beam {}. Model: {}. {}\n'.format(
                  args.split, run, args.k, args.backend, args.beam,
                  model_setup.run_description(setup), cli.provenance()))
    # The table, pages, records and figures are renamed together: an interrupted run
    # leaves the previous set whole.
    nlp_utils.atomic_write_files(output_writes(setup, results, stem, args.split) +
                                 table_writes(stem, rows, columns, header))
    print('wrote {}.md/.csv, its HTML pages and figures'.format(stem))


if __name__ == '__main__':
    cli.run_cli(main)
