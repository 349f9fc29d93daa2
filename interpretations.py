"""Word-importance maps (saliency maps) of a trained model, as in the paper's Table 2.

    python interpretations.py --model-setup results/stsa.binary_cnn/args.json \
        --methods conformity,confidence,gradient --split test --limit 20 \
        --out results/stsa.binary_cnn --name interpretations --png --neighbors 3

writes OUT/NAME.html (the maps), OUT/NAME.csv (the raw importances) and, with --png,
OUT/NAME.png.

The methods are in saliency.py (conformity, credibility, confidence and calibrated
leave-one-out, gradient); the page and the raw importances (CSV) are drawn by
saliency_report.py, the PNG pages by saliency_png.py.
"""
import os

from deepknn import cli
from deepknn.neighbors import dknn as dknn_lib
from deepknn.models import model_setup
import nlp_utils
from deepknn.interpret import leave_one_out
from deepknn.interpret import saliency
from deepknn.reports import saliency_png
from deepknn.reports import saliency_report
from deepknn.interpret import saliency_scores
from nlp_utils import UserError


# ---------------------------------------------------------------- CLI
def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_methods(parser, saliency, saliency.DEFAULT_METHODS)
    evaluated = parser.add_mutually_exclusive_group()
    cli.add_split(evaluated, help='split whose first --limit examples are interpreted')
    evaluated.add_argument('--eval-file', default=None,
                           help="interpret this file instead, in the training data's format")
    cli.add_limit(parser, 20, 'interpret the first N examples')
    cli.add_outputs(parser, "the run's result folder", 'interpretations_<split>',
                    old_path_flags=['--output'])
    # A path after --png is its old spelling, kept: the PNG written there.
    parser.add_argument('--png', nargs='?', const=True, default=False,
                        help='also write the maps as NAME.png; more than {0} examples go '
                             'into pages NAME_1.png, NAME_2.png, ... of {0} each'.format(
                                 saliency_png.PNG_PAGE_EXAMPLES))
    parser.add_argument('--normalization', choices=sorted(saliency_scores.NORMALIZATIONS),
                        default=saliency_scores.DEFAULT_NORMALIZATION,
                        help="how maps are scaled: 'total' (the paper's wording), "
                             "'per-sign' or 'half-scale' (the authors' code)")
    parser.add_argument('--neighbors', type=cli.non_negative_int, default=0,
                        help='show the N nearest training examples (final DkNN layer)')
    cli.add_dknn(parser)
    cli.add_engine(parser)
    cli.add_batchsize(parser, leave_one_out.DEFAULT_BATCHSIZE,
                      'rows (leave-one-out variants) per model batch and DkNN query')
    cli.add_device(parser)
    cli.add_skip_bad_lines(parser)
    return parser.parse_args(argv)


def output_paths(args, setup, split):
    """{'html', 'csv', 'png'} paths of --out/--name (png None without --png)."""
    stem = cli.output_stem(args, setup.result_dir, 'interpretations_{}'.format(split))
    png = args.png if isinstance(args.png, str) else stem + '.png' if args.png else None
    cli.check_output_path(png, '--png')
    return {'html': stem + '.html', 'csv': stem + '.csv', 'png': png}


def main(argv=None):
    args = parse_args(argv)
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    dknn_settings = cli.dknn_settings(args, setup.result_dir)   # checked before any work
    # A missing temperature.json fails here, before any work.
    plan = saliency.plan_methods(args.methods, setup.result_dir, argument='--methods')
    settings = saliency_report.page_settings(setup, plan, args.k, args.backend, args.neighbors)
    split, examples = setup.evaluation_examples(args.split, args.eval_file, args.skip_bad_lines)
    examples = examples[:args.limit]
    if not examples:
        raise UserError('the {} split is empty'.format(split))
    paths = output_paths(args, setup, split)
    cli.check_new_outputs([path for path in paths.values() if path], args.overwrite)
    dknn = None
    if settings['k'] is not None:
        dknn = dknn_lib.dknn_from_setup(setup, dknn_settings)
    results = saliency.interpret_all(setup, plan, examples, dknn, args.batchsize)
    neighbors = None
    if args.neighbors:
        neighbors = saliency.nearest_training_examples(
            setup.model, dknn, setup.splits.train, examples, args.neighbors, setup.vocab,
            args.batchsize)
    title = '{} {}: {} examples'.format(setup.config.dataset, setup.config.model, split)
    writes = saliency_report.map_writes(results, setup, paths, title,
                                        settings, args.normalization, neighbors)
    nlp_utils.atomic_write_files(writes)   # all renamed together, or none
    print('wrote {}'.format(', '.join(path for path, _, _ in writes)))


if __name__ == '__main__':
    cli.run_cli(main)
