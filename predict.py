"""Predictions, DkNN credibility and word-importance maps for new, unlabelled sentences.

    python predict.py --model-setup results/demo_sst_cnn/args.json \
        --input my_sentences.txt --out results/my_sentences

--input holds one sentence per line (for a pair model: premise, a tab, hypothesis), as
raw text: it is tokenized like the model's training data and lower-cased where the
vocabulary only knows the lower case. Writes OUT.csv and OUT.md: per line the model's
prediction and softmax probability, the DkNN's prediction, credibility and confidence,
and the words the model has no entry for; and OUT.html / OUT_importances.csv, a map per
sentence for each of --methods ('none' for no maps). A model trained with --n-calib 0
has no calibration split: its table has the softmax columns only.
"""
import numpy as np

from deepknn import cli
from deepknn import calibration
from deepknn import dknn as dknn_lib
from deepknn import dknn_evaluation
from deepknn import model_setup
from deepknn import result_folder
from deepknn import saliency
from deepknn.reports import saliency_report
from deepknn.reports.tables import markdown_table, write_table
import nlp_utils
import text_datasets
from nlp_utils import UserError


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    parser.add_argument('--input', required=True,
                        help='text file, one sentence (or premise<TAB>hypothesis) per line')
    parser.add_argument('--out', required=True,
                        help='output path without suffix (.csv, .md, .html)')
    parser.add_argument('--methods', default=','.join(saliency.DEFAULT_METHODS),
                        help="comma-separated interpretation methods, or 'none'")
    cli.add_dknn(parser)
    cli.add_engine(parser)
    cli.add_batchsize(parser)
    cli.add_device(parser)
    cli.add_overwrite(parser)
    return parser.parse_args(argv)


def read_inputs(setup, path):
    """[(line number, tokens)] of the user's file, case folded to the vocabulary."""
    config = setup.config
    return [(number, nlp_utils.fold_case(tokens, setup.vocab)) for number, tokens in
            text_datasets.read_new_inputs(path, config.dataset, config.pair, config.char_based,
                                          config.train_file)]


def unknown_words(tokens, vocab):
    parts = tokens if isinstance(tokens, tuple) else (tokens,)
    return ' '.join(t for part in parts for t in part if t not in vocab)


def prediction_rows(setup, inputs, dknn, batchsize):
    """One row per input: softmax (and DkNN, where there is one) prediction columns."""
    examples = setup.encode([(tokens, None) for _, tokens in inputs])
    if dknn is None:
        logits = dknn_lib.checked_activations(setup.model.layer_activations(
            [x for x, _ in examples], batchsize, progress='predicting'), 'input')[-1]
        result = {'softmax_probability': calibration.softmax(logits)}
    else:
        result = dknn_evaluation.evaluate(setup, dknn, examples, batchsize)
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
        row['unknown_words'] = unknown_words(tokens, setup.vocab)
        rows.append(row)
    return rows


def main(argv=None):
    args = parse_args(argv)
    methods = [] if args.methods == 'none' else saliency.parse_methods(args.methods, '--methods')
    outputs = [args.out + suffix for suffix in ('.csv', '.md')] + (
        [args.out + '.html', args.out + '_importances.csv'] if methods else [])
    cli.check_new_outputs(outputs, args.overwrite)
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    engine = cli.engine(args, setup.result_dir)   # Ray flags checked before any work
    if methods and not setup.splits.calib and saliency.needs_dknn(methods):
        raise UserError('--methods {}: needs a DkNN, and this model has no calibration split '
                        '(trained with --n-calib 0); pass --methods confidence,gradient'.format(
                            args.methods), 'methods')
    settings = saliency_report.page_settings(setup, methods, args.k, args.backend) if methods \
        else None
    inputs = read_inputs(setup, args.input)
    dknn = None
    if setup.splits.calib:
        with result_folder.lock(setup.result_dir, 'predict.py'):   # DkNN caches
            dknn = dknn_lib.dknn_from_setup(setup, args.backend, args.k,
                                            batchsize=args.batchsize, engine=engine)
    rows = prediction_rows(setup, inputs, dknn, args.batchsize)
    header = '# Predictions for {}\n\nModel: {}. {}{}\n'.format(
        args.input, model_setup.run_description(setup), cli.provenance(),
        '' if dknn else ' No calibration split: softmax only.')
    writes = []
    if methods:
        results = saliency.interpret_all(setup, methods, [(t, None) for _, t in inputs], dknn)
        writes = saliency_report.map_writes(
            results, setup, {'html': args.out + '.html', 'csv': args.out + '_importances.csv'},
            'Maps of {}'.format(args.input), settings)
    write_table(args.out, rows, list(rows[0]), header)
    nlp_utils.atomic_write_files(writes)
    print(markdown_table(rows, [c for c in rows[0] if c != 'unknown_words']))
    print('wrote {}'.format(', '.join(path for path in outputs)))


if __name__ == '__main__':
    nlp_utils.run_cli(main)
