"""Two seeded halves of ANLI dev for the in-domain ANLI setting (Rajani et al. 2020, Table 4).

    python scripts/anli_dev_halves.py --data-dir ../shared/data --seed 0 \
        --out results/anli-dev-halves_seed0

The paper trains on ANLI's 162,865 training pairs, which are not offline. In their place
a model is trained on one half of ANLI dev (split by round in proportion, seeded) and
kNN backoff is tuned and tested on the other half (scripts/knn_robustness.py splits it
again into validation and test parts). Writes into --out: train.jsonl and heldout.jsonl (the
halves as SNLI-format training / test files of train_text_classifier.py --dataset snli) and
anli-heldout-half_r1.csv .. _r3.csv (the held-out half by round, ANLI's CSV format: the
--eval-file of knn_robustness.py). `make rajani-anli-in-domain` runs the whole setting.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.data import eval_sets  # noqa: E402
import text_datasets  # noqa: E402
from deepknn.rajani import robustness  # noqa: E402
import nlp_utils  # noqa: E402


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_data_dir(parser)
    cli.add_seed(parser, help='seed of the split into halves')
    cli.add_out(parser, 'folder for the files (default: results/anli-dev-halves_seed<SEED>)')
    cli.add_overwrite(parser)
    return parser.parse_args(argv)


def half_files(seed, data_dir):
    """{file name: text} of the two halves of ANLI dev."""
    train, heldout = robustness.halves(eval_sets.load_eval_set('anli', data_dir=data_dir), seed)
    labels = list(eval_sets.ANLI_LABELS.values())
    as_ids = lambda part: [(pair, labels.index(label)) for pair, label in part.records]
    files = {name + '.jsonl': text_datasets.examples_text(as_ids(part), labels, 'pair_jsonl')
             for name, part in (('train', train), ('heldout', heldout))}
    for group in sorted(set(heldout.groups)):
        rows = [i for i, name in enumerate(heldout.groups) if name == group]
        files['anli-heldout-half_{}.csv'.format(group.lower())] = eval_sets.anli_csv(
            heldout.subset(rows, group).records)
    return files


def changed(path, text):
    """Whether writing `text` to `path` would change it (an identical file is left)."""
    if not os.path.exists(path):
        return True
    with open(path, encoding='utf-8') as handle:
        return handle.read() != text


def main(argv=None):
    args = parse_args(argv)
    args.out = args.out or os.path.join(cli.RESULTS, 'anli-dev-halves_seed{}'.format(args.seed))
    files = half_files(args.seed, args.data_dir)
    paths = {os.path.join(args.out, name): text for name, text in files.items()}
    writes = {path: text for path, text in paths.items() if changed(path, text)}
    cli.check_new_outputs(list(writes), args.overwrite)
    os.makedirs(args.out, exist_ok=True)
    nlp_utils.atomic_write_files([(path, lambda f, text=text: f.write(text), 'w')
                                  for path, text in writes.items()])
    print('{}: {} ({} already up to date)'.format(args.out, ', '.join(sorted(files)),
                                                  len(files) - len(writes)))


if __name__ == '__main__':
    cli.run_cli(main)
