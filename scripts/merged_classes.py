"""Merge a dataset's classes into groups, for the identical-subclass test of training-data
attribution (Hanawa et al. 2021; docs/attribution.md).

    python scripts/merged_classes.py --dataset TREC \
        --group thing=description,entity,abbreviation --group fact=human,location,number

Reads the dataset's labelled training and test files (sent-conv-torch `label text`
lines) and writes, under --out (default results/mine/<dataset>_merged), train.txt and
test.txt, each line's label replaced by its group's name (a custom dataset for
train_text_classifier.py --dataset custom), and subclasses.json: {"train": [...], "test": [...]}, the original class of every
written line. Every class must be in exactly one group. An existing OUT is refused
unless --overwrite.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
import nlp_utils  # noqa: E402
import text_datasets  # noqa: E402
from nlp_utils import UserError  # noqa: E402

SUBCLASSES = 'subclasses.json'


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--dataset', required=True,
                        choices=[name for name, spec in text_datasets.DATASETS.items()
                                 if set(spec['files']) == {'train', 'test'}],
                        help='a dataset with a training and a test file')
    parser.add_argument('--group', action='append', required=True, metavar='NAME=C1,C2',
                        help='a group: its name and the classes it merges (repeat)')
    cli.add_data_dir(parser, help='data folder (default: $DKNN_DATA_DIR, else ../shared/data)')
    cli.add_out(parser, 'folder written (default: results/mine/<dataset>_merged)')
    cli.add_overwrite(parser)
    return parser.parse_args(argv)


def group_of_class(groups, class_names):
    """{class name: group name} from NAME=C1,C2 texts; UserError naming the flag."""
    found = {}
    for text in groups:
        name, _, members = text.partition('=')
        if not name or not members or ' ' in name:
            raise UserError('--group {!r} must read NAME=CLASS,CLASS (a name without '
                            'spaces)'.format(text))
        for member in members.split(','):
            if member not in class_names:
                raise UserError('--group {}: {!r} is no class of the dataset ({})'.format(
                    text, member, ', '.join(class_names)))
            if member in found:
                raise UserError('--group: class {!r} is in two groups'.format(member))
            found[member] = name
    missing = [c for c in class_names if c not in found]
    if missing:
        raise UserError('--group: classes {} are in no group'.format(', '.join(missing)))
    return found


def merged_lines(path, class_names, groups):
    """(lines with the group as label, original class per line) of a `label text` file."""
    lines, subclasses = [], []
    with open(path, encoding='utf-8', errors='replace') as f:
        for number, line in enumerate(f, 1):
            label, _, text = line.strip().partition(' ')
            if not line.strip():
                continue
            if not label.isdigit() or int(label) >= len(class_names) or not text:
                raise UserError('{} line {}: expected `LABEL TEXT` with LABEL 0..{}'.format(
                    path, number, len(class_names) - 1))
            subclass = class_names[int(label)]
            lines.append('{} {}\n'.format(groups[subclass], text))
            subclasses.append(subclass)
    return lines, subclasses


def main(argv=None):
    args = parse_args(argv)
    spec = text_datasets.DATASETS[args.dataset]
    class_names = spec['display_names']
    groups = group_of_class(args.group, class_names)
    folder = os.path.join(args.data_dir or os.environ.get('DKNN_DATA_DIR')
                          or os.path.join(cli.CHECKOUT, '..', 'shared', 'data'), spec['folder'])
    out = args.out or os.path.join(cli.RESULTS, 'mine', args.dataset.lower() + '_merged')
    outputs = [os.path.join(out, name) for name in ('train.txt', 'test.txt', SUBCLASSES)]
    cli.check_new_outputs(outputs, args.overwrite)
    written, subclasses = [], {}
    for role, path in zip(('train', 'test'), outputs):
        source = os.path.join(folder, spec['files'][role])
        if not os.path.isfile(source):
            raise UserError('{} does not exist; pass --data-dir'.format(source))
        lines, subclasses[role] = merged_lines(source, class_names, groups)
        written.append((path, lambda f, lines=lines: f.writelines(lines), 'w'))
    os.makedirs(out, exist_ok=True)
    nlp_utils.atomic_write_files(written + [
        (outputs[2], lambda f: f.write(json.dumps(subclasses)), 'w')])
    print('{}: {} training and {} test lines in {} groups written to {}'.format(
        args.dataset, len(subclasses['train']), len(subclasses['test']),
        len(set(groups.values())), out))


if __name__ == '__main__':
    cli.run_cli(main)
