"""Predictions, DkNN credibility and word-importance maps for new, unlabelled sentences.

    python predict.py --model-setup results/demo_sst_cnn/args.json \
        --input my_sentences.txt --out results --name my_sentences

--input holds one sentence per line (for a pair model: premise, a tab, hypothesis), as
raw text: it is tokenized like the model's training data and lower-cased where the
vocabulary only knows the lower case. Writes OUT/NAME.csv and OUT/NAME.md: per line the
model's prediction and softmax probability, the DkNN's prediction, credibility and
confidence, each --trust scorer's score (docs/shift.md; higher = more trusted), and the
words the model has no entry for; and OUT/NAME.html and
OUT/NAME_importances.csv, a map per sentence for each of --methods ('none' for no
maps). A model trained with --n-calib 0 has no calibration split: its table has the
softmax columns only.
"""
import sys

from deepknn import cli
from deepknn.evaluation import calibration
from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import dknn_evaluation
from deepknn.models import model_setup
from deepknn.storage import result_folder
from deepknn.interpret import saliency
from deepknn.reports import saliency_report
from deepknn.reports.tables import markdown_table, table_writes
from deepknn.shift import trust
from deepknn.shift.scorers import SCORERS
import nlp_utils
from nlp_utils import UserError


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    parser.add_argument('--input', required=True,
                        help='text file, one sentence (or premise<TAB>hypothesis) per line')
    cli.add_outputs(parser, cli.RESULTS, 'predictions')
    cli.add_methods(parser, saliency, saliency.DEFAULT_METHODS, none=True)
    cli.add_trust(parser, SCORERS, trust.DEFAULT_TRUST)
    cli.add_dknn(parser)
    cli.add_engine(parser)
    cli.add_batchsize(parser)
    cli.add_device(parser)
    return parser.parse_args(argv)


def blank_lines(path):
    """How many lines of the file are blank (Setup.new_inputs skips them)."""
    with open(path, 'rb') as f:
        return sum(1 for line in f if not line.strip())


def input_notes(setup, inputs, path):
    """Where the model does not read the file as it stands: blank lines skipped, and for
    a transformer the lines longer than its max_length word pieces, read truncated.
    -> [note], one line each, naming the lines."""
    notes = []
    skipped = blank_lines(path)
    if skipped:
        notes.append('{} of {} skipped; the outputs are numbered by their line in the '
                     'file.'.format(nlp_utils.count(skipped, 'blank line'), path))
    labelled = label_first_lines(setup, path)
    if labelled:
        notes.append('every line of {} starts with a label of the model ({}): predict.py reads '
                     'it as a word of the sentence; for labelled data use run_dknn.py '
                     '--eval-file, which reads the labels and reports accuracy.'.format(
                         path, ', '.join(labelled)))
    if model_setup.is_transformer(setup.config):
        encoded = setup.encode([(tokens, None) for _, tokens in inputs])
        truncated = [number for (number, _), (ids, _) in zip(inputs, encoded)
                     if setup.model.count_truncated([ids])]
        if truncated:
            notes.append('{} longer than max_length {} word pieces, read truncated (the '
                         'words past it do not count): line{} {}.'.format(
                             nlp_utils.count(len(truncated), 'input'),
                             setup.config.max_length, '' if len(truncated) == 1 else 's',
                             ', '.join(map(str, truncated))))
    return notes


def label_first_lines(setup, path):
    """The labels that begin the lines of `path` ('1 a fine film'), when every non-blank
    line of a sentence model's file begins with one of the model's labels (raw, as the
    training data writes them, or as the reports name them); else []."""
    if setup.config.pair:
        return []
    names = set(setup.dataset.label_names) | set(setup.label_names)
    with open(path, encoding='utf-8', errors='replace') as f:
        firsts = [line.split(None, 1)[0] for line in f if line.strip()]
    return sorted(set(firsts)) if firsts and set(firsts) <= names else []


def unknown_words(tokens, vocab):
    parts = tokens if isinstance(tokens, tuple) else (tokens,)
    return ' '.join(t for part in parts for t in part if t not in vocab)


def prediction_rows(setup, inputs, dknn, batchsize, fitted_trust=None):
    """One row per input: softmax (and DkNN, where there is one) prediction columns, and
    a trust_<name> column per fitted trust scorer of `fitted_trust` ({name: scorer})."""
    examples = setup.encode([(tokens, None) for _, tokens in inputs])
    layers = dknn_lib.checked_activations(setup.model.layer_activations(
        [x for x, _ in examples], batchsize, progress='predicting'), 'input')
    if dknn is None:
        result = {'softmax_probability': calibration.softmax(layers[-1])}
    else:   # the last DkNN layer is the logits
        result = dknn_evaluation.evaluate_activations(dknn, layers, [None] * len(examples),
                                                      layers[-1])
    trusted = trust.trust_scores(fitted_trust, layers) if fitted_trust else {}
    names = setup.label_names
    rows = []
    for i, (number, tokens) in enumerate(inputs):
        softmax = result['softmax_probability'][i]
        row = {'line': number, 'text': saliency_report.example_text(tokens, setup.vocab),
               'prediction': names[int(softmax.argmax())],
               'softmax_probability': round(float(softmax.max()), 4)}
        if dknn is not None:
            row.update({'dknn_prediction': names[int(result['prediction'][i])],
                        'credibility': round(float(result['credibility'][i]), 4),
                        'dknn_confidence': round(float(result['confidence'][i]), 4)})
        row.update({'trust_' + name: round(float(scores[i]), 4)
                    for name, scores in trusted.items()})
        row['unknown_words'] = unknown_words(tokens, setup.vocab)
        rows.append(row)
    return rows


def output_stem(args):
    """DIR/STEM of the outputs. --out was an output path: `--out DIR/STEM` (no --name)
    still writes DIR/STEM.csv, ..."""
    return cli.output_stem(args, cli.RESULTS, 'predictions', out_was_path=True)


def main(argv=None):
    args = parse_args(argv)
    methods = args.methods
    stem = output_stem(args)
    outputs = [stem + suffix for suffix in ('.csv', '.md')] + (
        [stem + '.html', stem + '_importances.csv'] if methods else [])
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    dknn_settings = cli.dknn_settings(args, setup.result_dir)   # checked before any work
    if methods and not setup.splits.calib and saliency.needs_dknn(methods):
        raise UserError('--methods {}: needs a DkNN, and this model has no calibration split '
                        '(trained with --n-calib 0); pass --methods confidence,gradient'.format(
                            ','.join(args.methods)), 'methods')
    methods = saliency.plan_methods(methods, setup.result_dir, argument='--methods') \
        if methods else None     # temperature.json read once, here
    settings = saliency_report.page_settings(setup, methods, args.k, args.backend) if methods \
        else None
    inputs = setup.new_inputs(args.input)
    notes = input_notes(setup, inputs, args.input)
    cli.check_new_outputs(outputs, args.overwrite)   # the inputs are read and fine
    for note in notes:
        print('note: ' + note, file=sys.stderr)
    # Held until the outputs are written: a second run into the same --out stops here.
    with result_folder.lock_outputs(stem, outputs, 'predict.py'):
        cli.check_new_outputs(outputs, args.overwrite)   # none appeared meanwhile
        predict(args, setup, dknn_settings, (methods, settings), (inputs, notes), stem)
    print('wrote {}'.format(', '.join(path for path in outputs)))


def predict(args, setup, dknn_settings, maps, read, stem):
    """Predict `inputs` and draw their `maps` (methods, page settings) with the DkNN
    of `dknn_settings`, `read` being (inputs, notes on how they were read, for the
    table's header); write the table and the maps together under the path `stem` (no
    suffix)."""
    (methods, settings), (inputs, notes) = maps, read
    dknn, fitted_trust = None, {}
    if setup.splits.calib:
        dknn = dknn_lib.dknn_from_setup(setup, dknn_settings)
        fitted_trust = trust.fitted_trust(setup, dknn_settings, args.trust)
    rows = prediction_rows(setup, inputs, dknn, args.batchsize, fitted_trust)
    header = '# Predictions for {}\n\nModel: {}. {}{}\n{}'.format(
        args.input, model_setup.run_description(setup), cli.provenance(),
        '' if dknn else ' No calibration split: softmax only.',
        ''.join('\nNote: {}\n'.format(note) for note in notes))
    writes = []
    if methods:
        results = saliency.interpret_all(setup, methods, [(t, None) for _, t in inputs], dknn)
        writes = saliency_report.map_writes(
            results, setup, {'html': stem + '.html', 'csv': stem + '_importances.csv'},
            'Maps of {}'.format(args.input), settings,
            line_numbers=[number for number, _ in inputs])
    # The table and its maps are renamed together: never a table without its maps.
    nlp_utils.atomic_write_files(table_writes(stem, rows, list(rows[0]), header) + writes)
    print(markdown_table(rows, [c for c in rows[0] if c != 'unknown_words']))


if __name__ == '__main__':
    cli.run_cli(main)
