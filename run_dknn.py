"""Deep k-Nearest Neighbors (Papernot & McDaniel 2018) over a trained text classifier.

    python run_dknn.py --model-setup results/stsa.binary_cnn/args.json

Caches every DkNN layer's activations of the training data (minus the calibration
split), indexes them, calibrates on the calibration split, and reports test accuracy
with the softmax and with DkNN, plus credibility and confidence; writes dknn.json.
"""
import argparse
import os

import dknn as dknn_lib
import knn_index
import model_setup
import nlp_utils
import result_folder


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model-setup', required=True, help='results/<dataset>_<model>/args.json')
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss',
                        help='nearest-neighbour search: faiss (exact by default, the fastest), '
                             'kdtree (the paper\'s; same neighbours), lsh (approximate)')
    parser.add_argument('--lsh', dest='backend', action='store_const', const='lsh',
                        help='alias of --backend lsh (the original flag)')
    parser.add_argument('--k', type=nlp_utils.positive_int, default=75, help='neighbours per layer')
    parser.add_argument('--batchsize', type=nlp_utils.positive_int, default=64)
    parser.add_argument('--gpu', type=int, default=-1)
    parser.add_argument('--data-dir', default=None)
    parser.add_argument('--neighbor-labels', choices=('gold', 'predicted'), default='gold',
                        help="training labels (gold, like the original code) or the model's "
                             "predictions (as the paper's text says)")
    parser.add_argument('--last-layer-only', action='store_true',
                        help="only the last layer's neighbours count (the original KD-tree path)")
    parser.add_argument('--faiss-kind', choices=('flat', 'hnsw', 'ivf'), default='flat')
    parser.add_argument('--nprobe', type=int, default=16, help='faiss ivf cells searched')
    parser.add_argument('--ef-search', type=int, default=128, help='faiss hnsw search breadth')
    parser.add_argument('--lsh-bits', type=int, default=None, help='LSH hash bits per table')
    parser.add_argument('--lsh-tables', type=int, default=None, help='LSH hash tables')
    parser.add_argument('--no-cache', action='store_true', help='recompute train activations')
    return parser.parse_args(argv)


def index_options(args):
    if args.backend == 'faiss':
        return {'kind': args.faiss_kind, 'nprobe': args.nprobe, 'ef_search': args.ef_search}
    if args.backend == 'lsh':
        options = {'n_bits': args.lsh_bits, 'n_tables': args.lsh_tables}
        return {name: value for name, value in options.items() if value is not None}
    return {}


def evaluate_and_write(setup, args):
    """Build, calibrate and evaluate the DkNN; write dknn.json and the predictions."""
    timer = dknn_lib.PhaseTimer()
    dknn = dknn_lib.dknn_from_setup(setup, args.backend, args.k, args.neighbor_labels,
                                    args.last_layer_only, index_options(args), args.batchsize,
                                    not args.no_cache, timer)
    with timer('evaluate'):
        evaluation = dknn_lib.evaluate(setup, dknn, setup.test, args.batchsize)
    result = dknn_lib.summary(evaluation)
    result.update(backend=args.backend, k=args.k, neighbor_labels=args.neighbor_labels,
                  last_layer_only=args.last_layer_only, index_options=index_options(args),
                  n_short_queries=dknn.n_short_queries, seconds=timer.seconds,
                  dataset=setup.config['dataset'], model=setup.config['model'])
    nlp_utils.atomic_write_json(os.path.join(setup.result_dir, 'dknn.json'), result)
    nlp_utils.atomic_savez(os.path.join(setup.result_dir, 'dknn_predictions.npz'),
                           **{key: evaluation[key] for key in dknn_lib.PREDICTION_KEYS})
    return result


def main(argv=None):
    args = parse_args(argv)
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    with result_folder.lock(setup.result_dir, 'run_dknn.py'):
        result = evaluate_and_write(setup, args)
    print('softmax accuracy {softmax_accuracy:.4f}  dknn accuracy {dknn_accuracy:.4f}  '
          '({n_examples} test examples, {backend}, k={k})'.format(**result))


if __name__ == '__main__':
    nlp_utils.run_cli(main)
