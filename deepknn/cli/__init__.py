"""The command lines' shared flags (each defined once) and plumbing (deepknn/cli/plumbing.py).

Imported by the root scripts, `scripts/` and `benchmarks/` only; the library never reads
flags or sys.argv. A CLI builds its parser with `parser()` (an `ArgumentParser` whose
errors are one line), adds the shared flags with the `add_*` functions below, so a flag's
name, type, default and help are the same in every command, and runs its `main` through
`run_cli`, which prints a user error as one line.
"""
import argparse
import os
import sys

import nlp_utils
from deepknn.neighbors import dknn_settings as dknn_settings_lib
from deepknn.cli.plumbing import (  # noqa: F401  re-exported: commands import only cli
    CHECKOUT, PARAMETER_FLAGS, STEP_COMMANDS, command_name, command_line_text,
    command_line_message,
    run_cli, ArgumentParser, positive_int, non_negative_int, port_number, seed, positive_number,
    fraction, check_output_path, check_output_folder, output_stem, check_new_outputs,
    check_output_stem, check_table_outputs, machine_load, timed, median_and_range)
from deepknn.neighbors import knn_index
from deepknn.distributed import engine as engine_lib

DEFAULT_K = 75            # DkNN neighbours per layer (the paper's k)
RAJANI_K = 16             # neighbours of Rajani et al.'s kNN backoff and retrieval
RESULTS = 'results'       # where the (git-ignored) result folders of trained runs live
# The committed tables and figures, one folder per study under RESULTS (results/README.md
# is their index): each command's default --out is the folder of the study it serves.
WALLACE = os.path.join(RESULTS, 'wallace')            # Wallace et al. 2018: Tables 1-4
RAJANI = os.path.join(RESULTS, 'rajani')              # Rajani et al. 2020: kNN representations
FENG = os.path.join(RESULTS, 'feng')                  # Feng et al. 2018: input reduction
FAITHFULNESS = os.path.join(RESULTS, 'faithfulness')  # faithfulness and plausibility of maps
BENCHMARKS = os.path.join(RESULTS, 'benchmarks')      # speed measurements (benchmarks/)
SHIFT = os.path.join(RESULTS, 'shift')                # trust under distribution shift
ATTRIBUTION = os.path.join(RESULTS, 'attribution')    # which training examples it rests on
STUDIES = (WALLACE, RAJANI, FENG, FAITHFULNESS, BENCHMARKS, SHIFT, ATTRIBUTION)
def parser(doc):
    """An ArgumentParser described by the first line of a module docstring."""
    return ArgumentParser(description=doc.split('\n')[0])


def add_model_setup(parser, nargs=None, help='args.json of a trained run (or its folder)',
                    required=True):
    parser.add_argument('--model-setup', nargs=nargs, required=required, help=help,
                        type=model_setup_path)


def model_setup_path(text):
    """argparse type of --model-setup: the args.json of a trained run, given as the file
    or its folder. Another file of a run (its vocab.json, its weights) and a run that
    does not exist are refused when the flags are read, before any output is looked at."""
    path = os.path.join(text, 'args.json') if os.path.isdir(text) else text
    if os.path.isfile(path) and os.path.basename(path) != 'args.json':
        raise argparse.ArgumentTypeError(
            '{} is not the args.json of a run; pass RUN/args.json or the run folder RUN '
            '(made by train_text_classifier.py)'.format(text))
    if not os.path.exists(path):
        run = os.path.dirname(path) if os.path.basename(path) == 'args.json' else path
        raise argparse.ArgumentTypeError(
            '{} is no trained run ({} does not exist); make it with `python '
            'train_text_classifier.py --out {}` (or scripts/train_and_dknn.sh) or pass an '
            'existing run'.format(run or '.', 'it' if run == path else path, run or '.'))
    return path


def add_k(parser, default=DEFAULT_K, help='DkNN neighbours per layer', nargs=None):
    parser.add_argument('--k', type=positive_int, default=default, help=help,
                        nargs=nargs)


def add_dknn_k(parser):
    """--dknn-k: the DkNN's k where --k is another kNN's (Rajani et al.'s backoff)."""
    parser.add_argument('--dknn-k', type=positive_int, default=DEFAULT_K,
                        help='DkNN neighbours per layer for the credibility switch')


def add_layer(parser):
    """--layer: the activation layer a kNN over representations reads (training's
    number of recurrent layers is --lstm-layers)."""
    parser.add_argument('--layer', type=int, default=-2,
                        help='activation layer (default -2: the last hidden layer)')


def add_backend(parser, help='nearest-neighbour search (faiss flat: exact, the fastest here)'):
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss', help=help)


def add_index_options(parser):
    """The index options of --backend: faiss's kind and its search settings, LSH's
    hashing."""
    group = parser.add_argument_group('index options')
    group.add_argument('--faiss-kind', choices=('flat', 'hnsw', 'ivf', 'ivfpq'), default='flat',
                       help='flat is exact; hnsw, ivf and ivfpq (compressed) are approximate')
    for flag, default, help in (
            ('--pq-m', None, 'ivfpq bytes per vector (divides the layer size; default: the '
                             'largest divisor up to 64)'),
            ('--nprobe', 16, 'faiss ivf cells searched'),
            ('--ef-search', 128, 'faiss hnsw search breadth'),
            ('--lsh-bits', None, 'LSH hash bits per table'),
            ('--lsh-tables', None, 'LSH hash tables')):
        group.add_argument(flag, type=positive_int, default=default, help=help)


def add_dknn(parser):
    """--k and --backend, the DkNN's two settings."""
    add_k(parser)
    add_backend(parser)


# Every command's --split takes the same four names; one that cannot use a split says so.
SPLITS = ('train', 'dev', 'calib', 'test')


def add_split(parser, default='test', help='the split to read', unusable=None):
    """--split, one of SPLITS. `unusable`: {split: why this command cannot read it},
    refused in one line when the flags are read."""
    unusable = unusable or {}

    def split(text):
        if text in unusable:
            raise argparse.ArgumentTypeError('{}: {}'.format(text, unusable[text]))
        return text
    parser.add_argument('--split', choices=SPLITS, type=split, default=default, help=help)


def split_examples(setup, split):
    """The (tokens, label) examples of `split` of a loaded run; a UserError naming the
    run when the split is empty (a run trained with --n-calib 0 has no calib split)."""
    examples = getattr(setup.splits, split)
    if not examples:
        raise nlp_utils.UserError('--split {}: the {} split of {} is empty{}; pass another '
                                  '--split'.format(split, split, setup.result_dir,
                                                   ' (trained with --n-calib 0)'
                                                   if split == 'calib' else ''))
    return examples


def add_limit(parser, default=None, help='only the first N examples (default: all)'):
    parser.add_argument('--limit', type=positive_int, default=default, help=help)


def add_seed(parser, default=0, help='random seed'):
    parser.add_argument('--seed', type=seed, default=default, help=help)


def add_engine(parser):
    """--engine and the Ray flags: where a DkNN's activations and indexes are made
    (docs/ray.md). Read back with `engine(args, result_dir)`."""
    group = parser.add_argument_group('engine (docs/ray.md)')
    group.add_argument('--engine', choices=('local', 'ray'), default='local',
                       help='local: one process (default); ray: activations extracted by a '
                            'Ray Data actor pool, faiss shards searched by shard actors')
    group.add_argument('--ray-address', default=None,
                       help="with --engine ray: join a running cluster ('auto' or HOST:PORT; "
                            'default: start a local Ray on this machine)')
    group.add_argument('--shards', type=positive_int, default=None,
                       help='with --engine ray: index shards per layer (default 2)')
    group.add_argument('--workers', type=positive_int, default=None,
                       help='with --engine ray: extraction actors, each loading the model '
                            'once (default 2)')
    group.add_argument('--storage', default=None,
                       help='with --engine ray: folder for activation parts and index shards, '
                            'seen at the same path by every node (default: '
                            '<result folder>/ray_storage)')
    group.add_argument('--activation-dtype', choices=engine_lib.DTYPES, default=None,
                       help='with --engine ray: stored activations (default float32; float16 '
                            'halves the disk, search stays float32)')


RAY_FLAGS = ('ray_address', 'shards', 'workers', 'storage', 'activation_dtype')


def engine(args, result_dir):
    """The RayEngine that add_engine's flags ask for, or None for --engine local. The
    index follows --faiss-kind/--nprobe/--pq-m where the command has them (flat else)."""
    if args.engine == 'local':
        given = [name for name in RAY_FLAGS if getattr(args, name) is not None]
        if given:
            raise nlp_utils.UserError('--{} needs --engine ray'.format(given[0].replace('_', '-')))
        return None
    if getattr(args, 'backend', 'faiss') != 'faiss':
        raise nlp_utils.UserError('--engine ray searches faiss shards; pass --backend faiss')
    kind = getattr(args, 'faiss_kind', 'flat')
    if kind not in engine_lib.INDEX_KINDS:
        raise nlp_utils.UserError('--engine ray shards flat, ivf or ivfpq indexes, not --faiss-kind '
                                  '{}'.format(kind))
    engine_lib.check_reachable(args.ray_address)
    return engine_lib.RayEngine(
        storage=args.storage or os.path.join(result_dir, 'ray_storage'),
        shards=args.shards or 2, workers=args.workers or 2, address=args.ray_address,
        dtype=args.activation_dtype or 'float32', kind=kind,
        nprobe=getattr(args, 'nprobe', 16), pq_m=getattr(args, 'pq_m', None))


# The DkNNSettings fields a command's flag of the same name sets, where it has the flag.
SETTINGS_FLAGS = ('backend', 'neighbor_labels', 'last_layer_only', 'batchsize')


def dknn_settings(args, result_dir, k=None):
    """The DkNNSettings that a command's flags ask for: --k, --backend and its index
    options, --neighbor-labels, --last-layer-only, --batchsize and the engine flags,
    each where the command has it (the settings' default where not). `k`: the DkNN's k
    where the command's --k means another one (backoff's --dknn-k). A bad value is a
    UserError naming the parameter, which run_cli renders as its flag."""
    # Only the flags the command has: DkNNSettings' own defaults fill the rest.
    given = {name: getattr(args, name) for name in SETTINGS_FLAGS if hasattr(args, name)}
    return dknn_settings_lib.DkNNSettings(
        k=args.k if k is None else k, index_options=index_options(args),
        engine=engine(args, result_dir) if hasattr(args, 'engine') else None, **given)


def index_options(args):
    """The backend's index options from --faiss-kind, --nprobe, --ef-search, --pq-m,
    --lsh-bits and --lsh-tables, for a command that has them ({} for one that has not)."""
    backend = getattr(args, 'backend', dknn_settings_lib.DkNNSettings.backend)
    if backend == 'faiss' and hasattr(args, 'faiss_kind'):
        options = {'kind': args.faiss_kind, 'nprobe': args.nprobe, 'ef_search': args.ef_search}
        return dict(options, pq_m=args.pq_m) if args.faiss_kind == 'ivfpq' else options
    if backend == 'lsh' and hasattr(args, 'lsh_bits'):
        options = {'n_bits': args.lsh_bits, 'n_tables': args.lsh_tables}
        return {name: value for name, value in options.items() if value is not None}
    return {}


def add_batchsize(parser, default=64, help='inputs per model batch'):
    parser.add_argument('--batchsize', '-b', type=positive_int, default=default,
                        help=help)


def add_device(parser):
    """--gpu and --data-dir: where the model runs and where its data is read from."""
    parser.add_argument('--gpu', '-g', type=int, default=-1,
                        help='GPU id, negative for the CPU')
    add_data_dir(parser)


def add_data_dir(parser, help='data folder (default: $DKNN_DATA_DIR, else the one used in '
                              'training, else download)'):
    parser.add_argument('--data-dir', default=None, help=help)


def add_repeats(parser, default=3, help='timed repeats of each measurement (median and spread '
                                        'reported)'):
    parser.add_argument('--repeats', type=positive_int, default=default, help=help)


def add_runs(parser, help='comma-separated result folder names'):
    """--runs NAME,NAME: runs named by their result folders (a folder of runs a command
    makes is --runs-dir)."""
    parser.add_argument('--runs', required=True, help=help)


def add_methods(parser, registry, default=None, help='comma-separated interpretation methods',
                none=False, old_flag=None):
    """--methods a,b: interpretation methods from the registry, checked when the flags
    are read; read back as a tuple of names (with `none`, 'none' gives ()). `registry`:
    the module holding it, deepknn.interpret.saliency (its parse_methods and describe_methods; this
    module imports no layer above 1). `default`: names (None: the command decides).
    `old_flag`: a former spelling kept as a hidden alias."""
    def names(text):
        if none and text.strip() == 'none':
            return ()
        try:
            return registry.parse_methods(text)
        except nlp_utils.UserError as error:    # 'methods: why': argparse names the flag
            raise argparse.ArgumentTypeError(str(error).split(': ', 1)[1])
    parser.add_argument('--methods', type=names, default=None if default is None else
                        ','.join(default), help='{}{}: {}'.format(
                            help, " (or 'none')" if none else '',
                            registry.describe_methods().replace('%', '%%')))
    if old_flag:
        add_hidden_alias(parser, old_flag, 'methods', type=names)


def add_trust(parser, scorers, default=()):
    """--trust a,b ('none': none): trust scorers of the shift study (docs/shift.md) shown
    beside credibility, read back as a tuple of names. `scorers`: their Registry
    (deepknn.shift.scorers.SCORERS; this module imports no layer above 1)."""
    def names(text):
        try:
            return () if text.strip() == 'none' else scorers.parse(text, 'trust')
        except nlp_utils.UserError as error:    # 'trust: why': argparse names the flag
            raise argparse.ArgumentTypeError(str(error).split(': ', 1)[1])
    parser.add_argument('--trust', type=names, default=','.join(default) or 'none', help=(
        "trust scorers fitted on the training and calibration splits (or 'none'; default: "
        '%(default)s): ' + scorers.describe().replace('%', '%%')))


def add_epoch(parser, default, help='training epochs'):
    """--epoch (-e); --epochs is its hidden alias."""
    parser.add_argument('--epoch', '-e', type=positive_int, default=default, help=help)
    add_hidden_alias(parser, '--epochs', 'epoch', type=positive_int)


def add_result_folder(parser, help):
    """--out DIR (-o) of a training command: the result folder it makes."""
    parser.add_argument('--out', '-o', metavar='DIR', default=None, help=help)


def add_force(parser, help='replace an existing result folder of this tool once the new run '
                           'has finished (the old one is kept if it fails)'):
    """--force: training commands only (outputs of other commands: --overwrite)."""
    parser.add_argument('--force', action='store_true', help=help)


def add_hidden_alias(parser, flag, dest, **kwargs):
    """An old spelling `flag` of the flag whose value lands in `dest`: accepted, not in
    --help."""
    parser.add_argument(flag, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                        **kwargs)


def add_skip_bad_lines(parser):
    parser.add_argument('--skip-bad-lines', action='store_true',
                        help='skip malformed lines of data files (counted and reported) '
                             'instead of stopping')


def add_table_output(parser, default=None):
    """--out and --overwrite of a command writing tables into results/: committed
    tables there are only replaced when asked."""
    add_out(parser, 'where tables and figures go (default: the study folder under {}/, '
                    'where existing files are only replaced with --overwrite)'.format(RESULTS),
            default)
    parser.add_argument('--overwrite', action='store_true',
                        help='replace existing tables and figures in {}/'.format(RESULTS))


def add_table_output_after_subcommands(parser):
    """add_table_output's --out and --overwrite of `parser` accepted after each of its
    subcommands too (they default to the value given before it, or its default)."""
    subparsers = [action for action in parser._actions
                  if isinstance(action, argparse._SubParsersAction)]
    for sub in (sub for action in subparsers for sub in action.choices.values()):
        sub.add_argument('--out', metavar='DIR', default=argparse.SUPPRESS,
                         help='as --out before the subcommand')
        sub.add_argument('--overwrite', action='store_true', default=argparse.SUPPRESS,
                         help='as --overwrite before the subcommand')


def add_overwrite(parser):
    parser.add_argument('--overwrite', action='store_true',
                        help='replace existing tables and figures of the same names')


def add_out(parser, help, default=None):
    """--out DIR alone: the folder a command writes into."""
    parser.add_argument('--out', metavar='DIR', default=default, help=help)


def add_outputs(parser, default_dir=RESULTS, default_name=None, old_path_flags=()):
    """--out DIR (a folder), --name STEM (the file stem inside it) and --overwrite; read
    back with `output_stem`. `default_dir` and `default_name` are shown in --help (a
    command whose defaults depend on the run describes them in words).
    `old_path_flags`: the command's former spellings of one output path (e.g. --table
    PATH), kept as hidden aliases that write exactly where they did."""
    # '%(default).0s' prints nothing: the default in words replaces argparse's 'None'.
    add_out(parser, 'folder the outputs go into (default: {})%(default).0s'.format(default_dir))
    add_name(parser, default_name)
    add_overwrite(parser)
    parser.set_defaults(old_output_path=None)
    for flag in old_path_flags:
        add_hidden_alias(parser, flag, 'old_output_path', action=OldOutputPath)


class OldOutputPath(argparse.Action):
    """Keeps (flag, PATH) of an old output-path spelling, so messages name the flag."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, (option_string, values))


def add_benchmark_outputs(parser, default_name, printed_only=False):
    """add_outputs of a benchmark's table, BENCHMARKS/`default_name`.md by default (with
    `printed_only`: written only when --out or --name is given); read back with
    benchmark_table."""
    add_outputs(parser, BENCHMARKS + (' (given --out or --name; else the table is only '
                                      'printed)' if printed_only else ''), default_name)
    parser.set_defaults(benchmark_table=(default_name, printed_only))


def benchmark_table(args, suffixes=('.md',)):
    """The stem of a benchmark's table (None: only printed), its files STEM + `suffixes`
    checked against --overwrite. The old --out FILE.md / --out DIR/STEM still write
    there."""
    default_name, printed_only = args.benchmark_table
    if printed_only and args.out is None and args.name is None:
        return None
    stem = output_stem(args, BENCHMARKS, default_name, out_was_path=True)
    check_new_outputs([stem + suffix for suffix in suffixes], args.overwrite)
    return stem


def add_name(parser, default_name, default=None):
    """--name STEM: the file stem of a command's outputs inside its --out folder.
    `default_name` is shown in --help; `default` is the value (None: the command works
    it out, e.g. from the run)."""
    parser.add_argument('--name', metavar='STEM', default=default,
                        help='file stem inside --out: STEM.md, STEM.csv, ... (default: '
                             '{})%(default).0s'.format(default_name))


def provenance(argv=None):
    """'Produced by: `python script.py --flags`', the line every written table carries."""
    argv = sys.argv if argv is None else argv
    return 'Produced by: `python {}`'.format(' '.join([os.path.relpath(argv[0])] + argv[1:])
                                             if argv else '')
