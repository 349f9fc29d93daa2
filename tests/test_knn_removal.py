"""scripts/knn_removal.py: flags reproduced from args.json, drops computed per seed."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'scripts'))
import knn_removal  # noqa: E402
import train_text_classifier  # noqa: E402


def test_training_flags_round_trip_through_the_trainer_parser():
    config = {'dataset': 'cad-snli', 'model': 'cnn', 'word_vectors': '/v.txt.gz', 'embed_dim': 50,
              'batchsize': 32, 'epoch': 7, 'unit': 60, 'layer': 1, 'dropout': 0.25,
              'data_dir': '/data', 'train_file': None, 'dev_file': None, 'test_file': None,
              'dev_fraction': 0.2, 'min_freq': 3, 'max_vocab': None, 'char_based': False,
              'select_on_test': False, 'skip_bad_lines': True, 'snli_majority': False,
              'seed': 5, 'n_calib': 100, 'label_noise': 0.1}
    args = vars(train_text_classifier.parse_args(knn_removal.training_flags(config)))
    for key in knn_removal.VALUE_FLAGS + knn_removal.SWITCH_FLAGS:
        assert args[key] == config[key], key
    assert args['label_noise'] == 0.0 and args['seed'] == 777   # never copied


def test_drops_are_full_minus_variant_in_points_averaged_over_seeds():
    per_seed = {1: {'full': 0.60, (0.1, 'top'): 0.50, (0.1, 'random'): 0.58},
                2: {'full': 0.70, (0.1, 'top'): 0.64, (0.1, 'random'): 0.70}}
    row, = knn_removal.table_rows(per_seed, [0.1])
    assert row['drop_most_retrieved'] == pytest.approx(8.0)
    assert row['drop_random'] == pytest.approx(1.0)
    assert row['seed 1 full / top / random'] == '60.0 / 50.0 / 58.0'
    assert (row['paper_drop_most_retrieved'], row['paper_drop_random']) == (4.6, 1.2)
