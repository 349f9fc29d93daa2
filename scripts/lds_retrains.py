"""Train the M models of the linear datamodeling score: a run's recipe on random halves
of its training split (resumable; docs/attribution.md).

    python scripts/lds_retrains.py --model-setup results/sst2_cnn_attr --m 100

Draws M halves of the run's training split with --seed (written to OUT/subsets.json;
a folder holding another draw is refused) and trains OUT/half_000 ... with the run's
settings, its seed included, and the other half excluded. A finished half is skipped
and an unfinished one resumes from its last epoch, so a stopped call continues where it
stopped. --out defaults to the run's folder with _lds appended (results/sst2_cnn_attr_lds);
scripts/training_data_attribution.py reads the halves from there.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.attribution import datamodels  # noqa: E402
from deepknn.models import model_setup  # noqa: E402


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, help='args.json of the run whose recipe is retrained')
    parser.add_argument('--m', type=cli.positive_int, default=64,
                        help='number of halves (models); the LDS literature uses 50 or more')
    cli.add_seed(parser, help='seed drawing the halves')
    cli.add_out(parser, 'folder of the halves, subsets.json and half_000 ... (default: the '
                        "run's folder with _lds appended)")
    cli.add_data_dir(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = args.out or os.path.dirname(os.path.abspath(args.model_setup)) + '_lds'
    template = model_setup.read_config(args.model_setup)
    if args.data_dir:
        template = template.replace(data_dir=os.path.abspath(args.data_dir))
    _, splits = model_setup.load_data(template)
    masks = datamodels.subset_masks(out, len(splits.train), args.m, args.seed)
    datamodels.train_subsets(template, out, masks, cli.command_name(__file__))
    print('{} halves of {} training examples trained in {}'.format(
        args.m, len(splits.train), out))


if __name__ == '__main__':
    cli.run_cli(main)
