"""The DkNN's Ray path: activations extracted by the Ray Data pipeline into storage,
sharded indexes behind the NeighborIndex interface (dknn.fitted_dknn_from_setup with an
engine calls this), so calibration, evaluation and every report work unchanged."""
from deepknn.distributed import activations
from deepknn.distributed import search
from deepknn.distributed import shards


def fitted(dknn, setup, settings, activation_key, timer):
    """`dknn` fitted on sharded indexes of the setup's training split, built by
    settings.engine (a dknn_settings.DkNNSettings); the timer's 'cache' phase is the
    extraction, 'index' the shard building and loading."""
    engine = settings.engine
    with timer('cache'):
        parts = activations.extract_split(engine, setup, 'train', activation_key,
                                          settings.batchsize)
    with timer('index'):
        widths = parts.layer_widths()
        searched = [len(widths) - 1] if dknn.last_layer_only else list(range(len(widths)))
        indexes = search.sharded_indexes(engine, parts, searched,
                                         shards.model_folder(engine.storage, activation_key))
        return dknn.fit_indexes(indexes, parts.column(settings.neighbor_labels), widths)


def split_activations(engine, setup, split, activation_key, batchsize):
    """(list of (N, D_l) float32, gold labels (N,)) of a split, through the pipeline."""
    parts = activations.extract_split(engine, setup, split, activation_key, batchsize)
    widths = parts.layer_widths()
    return [parts.column('layer_{}'.format(i)) for i in range(len(widths))], parts.column('gold')
