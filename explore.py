"""Explore a trained run in the browser: predictions, neighbours, every map, the training set.

    python explore.py --model-setup results/demo_sst_cnn/args.json [--port 8765]
    python explore.py --model-setup results/demo_sst_cnn/args.json \
        --export results/demo_sst_cnn_explorer --split test --limit 50
    python explore.py --model-setup results/stsa.binary_cnn/args.json \
        --compare results/stsa.binary_minilm/args.json

The first form starts a local web app (Starlette on uvicorn) and prints the address to
open; the model and the DkNN are loaded once, their caches reused (see docs/explorer.md).
It binds to 127.0.0.1; --host 0.0.0.0 (or any other address) needs --allow-remote and
prints a warning, since anyone who reaches the port can use the model. The second form
writes a self-contained folder (HTML, JS, JSON) of --limit examples of --split that
opens from disk, and exits. The third serves two runs of one dataset side by side (the
Compare view: a sentence in both, and the examples they disagree on).
"""
import os
import socket
import sys

from deepknn import cli
from deepknn.explorer import app
from deepknn.explorer import compare
from deepknn.explorer import export
from deepknn.explorer import session as explorer
from deepknn.attribution import from_layers
from deepknn.shift import trust
from deepknn.shift.scorers import SCORERS
from nlp_utils import UserError

LOCAL_HOSTS = ('127.0.0.1', 'localhost', '::1')


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_dknn(parser)
    cli.add_trust(parser, SCORERS, trust.DEFAULT_TRUST)
    cli.add_batchsize(parser)
    cli.add_device(parser)
    parser.add_argument('--port', type=cli.port_number, default=8765,
                        help='port of the web app (default 8765)')
    parser.add_argument('--host', default='127.0.0.1',
                        help='address to bind (default 127.0.0.1: this machine only)')
    parser.add_argument('--allow-remote', action='store_true',
                        help='allow a --host other than this machine (prints a warning)')
    parser.add_argument('--neighbors', type=cli.positive_int, default=10,
                        help='training examples shown per layer (default 10)')
    parser.add_argument('--attribution', choices=list(from_layers.FROM_LAYERS) + ['none'],
                        default=from_layers.DEFAULT,
                        help='training-data attribution shown beside the neighbours: the '
                             'training examples that most support the prediction '
                             '(docs/attribution.md; default %(default)s)')
    parser.add_argument('--max-characters', type=cli.positive_int,
                        default=explorer.MAX_CHARACTERS,
                        help='longest text a user may type (default %(default)s)')
    parser.add_argument('--eval-file', action='append', default=[],
                        help='an evaluation file (the model\'s data format, with labels) to '
                             'show in the dataset view beside the splits; repeatable')
    parser.add_argument('--compare', metavar='ARGS_JSON', type=cli.model_setup_path,
                        default=None, help='a second run of the same dataset (its args.json '
                        'or folder) to serve beside the first (the Compare view)')
    parser.add_argument('--export', metavar='DIR', default=None,
                        help='write a static explorer folder of --limit examples of --split '
                             'instead of serving')
    cli.add_split(parser, help='split of the export, or the one the dataset view evaluates '
                  'before serving (others are evaluated when first opened)')
    cli.add_limit(parser, 50, 'examples in the export')
    cli.add_overwrite(parser)
    return parser.parse_args(argv)


def check_host(args):
    if args.host not in LOCAL_HOSTS and not args.allow_remote:
        raise UserError('--host {} lets other machines use the model; pass --allow-remote as '
                        'well if that is meant, or leave --host at 127.0.0.1'.format(args.host))


def check_eval_files(args):
    """UserError naming the first --eval-file that is no readable file, before loading."""
    for path in args.eval_file:
        if not os.path.isfile(path):
            raise UserError('--eval-file {} is not a file; pass a labelled file in the '
                            'model\'s data format'.format(path))


def open_session(args, model_setup=None):
    """The ExplorerSession of --model-setup (or `model_setup`) with the flags' settings."""
    settings = explorer.Settings(cli.dknn_settings(args, None), n_neighbors=args.neighbors,
                                 trust=args.trust, max_characters=args.max_characters,
                                 attribution=None if args.attribution == 'none' else
                                 args.attribution,
                                 gpu=args.gpu, data_dir=args.data_dir)
    session = explorer.ExplorerSession.open(model_setup or args.model_setup, settings)
    for path in args.eval_file:
        name, examples = session.setup.evaluation_examples(eval_file=path)
        session.add_examples(name, examples)
    return session


def check_port(host, port):
    """UserError when (host, port) cannot be bound, before the address is printed."""
    try:
        socket.getaddrinfo(host, port)
    except socket.gaierror as error:
        raise UserError('--host {} does not resolve to an address ({}); pass an address such as '
                        '127.0.0.1'.format(host, error.strerror))
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        raise UserError('--port {} on {} cannot be used ({}); pass another --port'.format(
            port, host, error.strerror or error))


def serve(session, args, other=None):
    import uvicorn
    if args.host not in LOCAL_HOSTS:
        print('warning: serving on {}: anyone who can reach port {} can use this model and '
              'read its training data'.format(args.host, args.port), file=sys.stderr)
    allowed = None if args.host not in LOCAL_HOSTS else list(LOCAL_HOSTS) + ['[::1]']
    shown = 'localhost' if args.host in LOCAL_HOSTS else args.host
    print('explorer of {}: open http://{}:{}/ (Ctrl-C stops it)'.format(
        session.setup.result_dir, shown, args.port), flush=True)
    uvicorn.run(app.make_app(session, allowed, other), host=args.host, port=args.port,
                log_level='warning')


def main(argv=None):
    args = parse_args(argv)
    check_host(args)
    check_eval_files(args)
    if args.compare and args.export:
        raise UserError('--compare serves two runs; the static export holds one: drop '
                        '--compare or --export')
    if not args.export:
        check_port(args.host, args.port)
    if args.export:
        cli.check_new_outputs([args.export], args.overwrite, '--export')
        export.check_export_folder(args.export, args.overwrite)
    session = open_session(args)
    if args.export:
        data = export.export_data(session, args.split, args.limit, cli.provenance())
        print('wrote {} (open it in a browser; no server needed)'.format(
            export.write_export(args.export, data, cli.command_name(__file__))))
        return
    other = None
    if args.compare:
        other = open_session(args, args.compare)
        compare.check_comparable(session, other)
    session.table(args.split)   # the dataset view's first page, ready before the address
    serve(session, args, other)


if __name__ == '__main__':
    cli.run_cli(main)
