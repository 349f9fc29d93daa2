"""The Ray engine on a cluster of two nodes (two raylets on this machine, each with its
own object store, as two machines would have): the shard search actors spread over both
nodes and the sharded DkNN still gives the one-process answers."""
import numpy as np
import pytest

ray = pytest.importorskip('ray')

from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.distributed.engine import RayEngine  # noqa: E402
from deepknn.neighbors.dknn_settings import DkNNSettings  # noqa: E402
from tests.distributed.test_ray import K, tiny_run  # noqa: E402,F401


@pytest.fixture(scope='module')
def two_nodes():
    """The address of a head node and one worker node, 1 CPU each."""
    ray.shutdown()                       # not the one-node Ray of another test module
    cluster = Cluster(initialize_head=True, head_node_args={'num_cpus': 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)    # the driver joins as the engine would
    cluster.wait_for_nodes()
    nodes = [node['NodeID'] for node in ray.nodes() if node['Alive']]
    assert len(nodes) == 2
    # A node can be alive before the head schedules onto it (a fresh worker's resources
    # reach the scheduler a moment later): one task pinned to each node waits for that.
    here = ray.remote(num_cpus=0)(lambda: ray.get_runtime_context().get_node_id())
    pinned = [here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
              .remote() for node in nodes]
    assert sorted(ray.get(pinned, timeout=120)) == sorted(nodes)
    yield cluster.address
    ray.shutdown()
    cluster.shutdown()


def test_two_nodes_both_search_and_answer_as_one_process(tiny_run, two_nodes,  # noqa: F811
                                                         tmp_path, capsys):
    local = dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K), use_cache=False)
    engine = RayEngine(storage=str(tmp_path / 'storage'), shards=2, workers=2,
                       address=two_nodes, part_rows=16)
    sharded = dknn_lib.dknn_from_setup(tiny_run, DkNNSettings(K, engine=engine))
    said = [line for line in capsys.readouterr().err.splitlines() if 'search actor' in line]
    assert said == ['2 shard search actors on 2 Ray nodes']
    test = tiny_run.model.layer_activations([x for x, _ in tiny_run.test])
    expected, found = local.predict_from_activations(test), sharded.predict_from_activations(test)
    for key in ('prediction', 'p_values', 'credibility', 'neighbors'):
        np.testing.assert_array_equal(found[key], expected[key], err_msg=key)
