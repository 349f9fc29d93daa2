"""The training library's optimizers: the flags reach them, the BERT schedule is right."""
import pytest

from deepknn import training
from test_knn_removal import template_config


def test_the_learning_rate_flag_reaches_every_optimizer():
    """--lr is the Chainer models' Adam rate too (it was read only for transformers)."""
    cnn = template_config(lr=0.01)
    optimizer, hooks, schedule = training.make_optimizer(cnn, n_train=100)
    assert optimizer.alpha == 0.01 and schedule is None
    assert training.make_optimizer(template_config(), 100)[0].alpha == 0.001
    minilm = template_config(model='minilm', lr=3e-5, epoch=2, batchsize=10, warmup=0.1)
    optimizer, hooks, schedule = training.make_optimizer(minilm, n_train=100)
    # 20 steps, 2 of warm-up: the first step runs at 1/2 of the rate; decay is 0.01 x lr.
    assert optimizer.alpha == 3e-5 and optimizer.eta == 0.5
    assert optimizer.weight_decay_rate == pytest.approx(0.01 * 3e-5)
