"""kNN backoff on adversarial NLI sets (Rajani et al. 2020, Tables 4-6: ANLI and HANS).

    python scripts/knn_robustness.py --model-setup results/cad-snli_cnn/args.json \
        --dataset anli hans-like --data-dir ../shared/data --out results/rajani --name knn_robustness

For each trained NLI model and evaluation set: a seeded validation part, balanced across
ANLI rounds (half of ANLI) or HANS heuristics and subcases (10,000 of HANS's 30,000),
tunes T and tau of the kNN backoff at k=64 (the paper's); the rest is the test part.
HANS predictions are collapsed to entailment / non-entailment. Writes NAME_table4
(accuracy, with Table 5's tau and T), NAME_groups (per ANLI round / HANS heuristic),
NAME_table6 (HANS not-entail accuracy per heuristic) and NAME_hans_subcases (the 30
subcases), each .md and .csv. Every model/set result is cached in its run folder
(knn_robustness_<set>_seed<S>.json), so a stopped run resumes.
"""
import contextlib
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.data import eval_sets  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.storage import result_folder  # noqa: E402
from deepknn.rajani import robustness  # noqa: E402
from deepknn.reports import robustness_tables  # noqa: E402
from deepknn.reports.tables import markdown_table, table_writes  # noqa: E402
import nlp_utils  # noqa: E402

OUTPUTS = ('table4', 'groups', 'table6', 'hans_subcases')


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, '+', 'args.json of trained NLI runs (or their folders)')
    sets = parser.add_mutually_exclusive_group(required=True)
    sets.add_argument('--dataset', nargs='+', choices=sorted(eval_sets.SPECS),
                      help='evaluation sets by name, read from --data-dir')
    sets.add_argument('--eval-file', nargs='+',
                      help='your own files instead: ANLI .csv files (one set) or one HANS '
                           'heuristics_evaluation_set.txt (or .gz)')
    cli.add_k(parser, robustness.PAPER_K, 'neighbours of the kNN (the paper: 64)')
    parser.add_argument('--n-validation', type=cli.positive_int, default=None,
                        help='pairs that tune T and tau (default: half of ANLI, 10,000 of HANS)')
    cli.add_seed(parser, help='seed of the validation / test split')
    cli.add_limit(parser, help='a seeded sample of N pairs per set, balanced like the split '
                               '(for slow models; the tables name the set <name>-<N>)')
    cli.add_skip_bad_lines(parser)
    cli.add_layer(parser)
    cli.add_batchsize(parser)
    cli.add_device(parser)
    cli.add_engine(parser)
    cli.add_outputs(parser, cli.RAJANI, 'knn_robustness (tables STEM_table4, STEM_groups, ...)')
    return parser.parse_args(argv)


def load_sets(args):
    """[EvalSet], each named as its tables call it: 'anli', 'hans-like' (results on it are
    HANS-like), a file name, or '<name>-<N>' for a --limit sample."""
    if args.eval_file:
        sets = [eval_sets.load_eval_set(files=args.eval_file, skip_bad_lines=args.skip_bad_lines)]
    else:
        sets = [eval_sets.load_eval_set(name, data_dir=args.data_dir,
                                        skip_bad_lines=args.skip_bad_lines)
                for name in dict.fromkeys(args.dataset)]
    for eval_set in sets:
        if eval_set.n_bad_lines:
            print('{}: {} skipped'.format(eval_set.name, nlp_utils.count(
                eval_set.n_bad_lines, 'malformed row')), file=sys.stderr)
    if args.limit:
        sets = [robustness.balanced_sample(eval_set, args.limit, args.seed) for eval_set in sets]
    return sets


def measure(args, sets):
    """{'table4': rows, 'groups': rows, 'table6': rows, 'hans_subcases': rows} and the
    models' descriptions, every model x set result read from or put in its cache."""
    tables, models = {name: [] for name in OUTPUTS}, []
    with contextlib.ExitStack() as locks:
        for path in args.model_setup:
            setup = model_setup.load_setup(path, args.gpu, args.data_dir)
            engine = cli.engine(args, setup.result_dir)
            # Its results are cached in the run folder (the DkNN caches lock themselves).
            locks.enter_context(result_folder.lock(setup.result_dir, 'knn_robustness.py'))
            models.append(model_setup.run_description(setup))
            for eval_set in sets:
                set_name = eval_set.name
                result = robustness.cached_robustness_experiment(
                    setup, eval_set, args.layer, args.batchsize, args.k, args.seed,
                    args.n_validation, engine)
                tables['table4'].append(robustness_tables.table4_row(setup, set_name, result))
                tables['groups'] += robustness_tables.group_rows(setup, set_name, result)
                if eval_set.binary:
                    tables['table6'] += robustness_tables.group_rows(setup, set_name, result,
                                                                     'not_entail')
                    tables['hans_subcases'] += robustness_tables.group_rows(
                        setup, set_name, result, 'subcases')
    return tables, models


TITLES = {'table4': 'Table 4 (and Table 5\'s tau): test-part accuracy (%)',
          'groups': 'test-part accuracy (%) per ANLI round / HANS heuristic',
          'table6': 'Table 6: HANS not-entail accuracy (%) per heuristic, test part',
          'hans_subcases': 'accuracy (%) per HANS subcase, test part'}


def output_stem(args):
    """--out/--name of the tables (default results/rajani/knn_robustness)."""
    return cli.output_stem(args, cli.RAJANI, 'knn_robustness')


def main(argv=None):
    args = parse_args(argv)
    stem = output_stem(args)
    stems = {name: '{}_{}'.format(stem, name) for name in OUTPUTS}
    cli.check_new_outputs([stem + '.md' for stem in stems.values()], args.overwrite)
    cli.engine(args, args.out)   # the engine flags checked before any work (storage: per run)
    sets = load_sets(args)
    tables, models = measure(args, sets)
    tables['table4'] += robustness_tables.paper_table4_rows(sets)
    if tables['table6']:
        tables['table6'] += robustness_tables.paper_table6_rows()
    header = ('kNN backoff (Rajani et al. 2020) at k={} on {}: T and tau tuned on a seeded '
              '(seed {}) validation part balanced across ANLI rounds / HANS heuristics and '
              'subcases, accuracy on the rest; HANS predictions collapsed to entailment / '
              'non-entailment. Our models are trained on SNLI-style data (proxies), not on '
              'ANLI\'s train split as the paper\'s; results on the generated HANS copy are '
              'HANS-like.\n{}\n{}\n'.format(args.k, ', '.join(s.name for s in sets),
                                            args.seed, model_setup.models_line(models),
                                            cli.provenance()))
    writes = []
    for name, rows in tables.items():
        if rows:
            rows[:] = [dict(dict.fromkeys(rows[0], ''), **row) for row in rows]   # paper rows
            writes += table_writes(stems[name], rows, list(rows[0]),
                                   '# {}\n\n{}'.format(TITLES[name], header))
    nlp_utils.atomic_write_files(writes)
    print(markdown_table(tables['table4'], list(tables['table4'][0])))
    if tables['table6']:
        print(markdown_table(tables['table6'], list(tables['table6'][0])))


if __name__ == '__main__':
    cli.run_cli(main)
