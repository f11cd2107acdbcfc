"""Data-parallel jobs: every replica is compared, a TP-sharded gradient's data-parallel all_reduce merges, and a
stated layout the dump contradicts is refused.

The jobs are assembled from the shared TP2 and TP1 dumps: replica r of a TP2 x DP2 job is a copy of a TP2 job
whose ranks are renumbered (group_ranks [0, 1] -> [2, 3]); every rank then all_reduces its slice of a
column-parallel weight's gradient over its data-parallel group, outside every module, as a training loop does.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from graphcmp.core.distributed.merge import job_steps, merge_replicas, read_step
from graphcmp.core.distributed.merged import run_merged
from graphcmp.core.distributed.topology import LayoutContradiction, parse_layout
from graphcmp.core.records import Role
from graphcmp.core.shards import SPLIT

pytestmark = pytest.mark.shared

GRAD = "Module.module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.parameters_grad.0"
DP_REDUCE = "Distributed.all_reduce.{}.forward"


def _renumber(value: object, offset: int) -> object:
    """A dump entry with every recorded group's ranks moved by `offset`."""
    if isinstance(value, dict):
        return {k: ([r + offset for r in v] if k == "group_ranks" else _renumber(v, offset)) for k, v in value.items()}
    if isinstance(value, list):
        return [_renumber(v, offset) for v in value]
    return value


def _with_dp_reduce(data: dict, group: list[int]) -> dict:
    """`data` with a top-level all_reduce of its fc1 weight gradient over the data-parallel `group` appended."""
    grad = data[GRAD]["weight"][0]
    total = {**grad, **{stat: grad[stat] * len(group) for stat in ("Max", "Min", "Mean", "Norm")}}  # equal replicas
    count = sum(k.startswith("Distributed.all_reduce.") for k in data)
    kwargs = {"group": {"type": "torch.ProcessGroup", "group_ranks": group, "group_id": "dp"}}
    return {**data, DP_REDUCE.format(count): {"input_args": [grad], "input_kwargs": kwargs, "output": [total]}}


def _write_rank(source: Path, target: Path, offset: int, group: list[int]) -> None:
    target.mkdir(parents=True)
    dump = json.loads((source / "dump.json").read_text())
    dump["data"] = _with_dp_reduce(_renumber(copy.deepcopy(dump["data"]), offset), group)
    (target / "dump.json").write_text(json.dumps(dump))
    construct = json.loads((source / "construct.json").read_text())
    construct[DP_REDUCE.format(sum(k.startswith("Distributed.all_reduce.") for k in dump["data"]) - 1)] = None
    (target / "construct.json").write_text(json.dumps(construct))
    if (source / "stack.json").is_file():
        shutil.copy(source / "stack.json", target / "stack.json")


def _dp_job(root: Path, replicas: list[Path]) -> Path:
    """Replica r of the job is the TP job replicas[r], its ranks numbered from r * tp (Megatron's tp-dp order)."""
    tp = len(list((replicas[0] / "step0").glob("rank*")))
    for r, job in enumerate(replicas):
        for i in range(tp):
            group = [i + tp * k for k in range(len(replicas))]
            _write_rank(job / "step0" / f"rank{i}", root / "step0" / f"rank{r * tp + i}", r * tp, group)
    return root


@pytest.fixture(scope="module")
def parallel():
    from tests.conftest import shared

    return shared("msprobe/dumps/parallel")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, parallel):
    base = tmp_path_factory.mktemp("dp")
    return {
        "clean": _dp_job(base / "clean", [parallel / "tp2", parallel / "tp2"]),
        "bad_replica": _dp_job(base / "bad_replica", [parallel / "tp2", parallel / "tp2_desync"]),
        "bench": _dp_job(base / "bench", [parallel / "tp1", parallel / "tp1"]),
    }


def _row(graph, node, role, slot="0"):
    t = graph.tensors
    return next(k for k in graph.tensor_rows(node).tolist() if t.role[k] == role and t.slot[k] == slot)


def test_every_replica_merges_and_the_gradient_all_reduce_stays_split(jobs):
    graphs = read_step(next(iter(job_steps(jobs["clean"]).values())), workers=1)
    replicas = merge_replicas(graphs, step=0)
    assert [r.replica for r in replicas] == [0, 1] and replicas[0].layout.dp == 2
    reduce = max((i for i in replicas[1].graph.nodes.ids if i.startswith("Distributed.all_reduce.")),
                 key=lambda i: int(i.split(".")[2]))  # the last one: the data-parallel gradient all_reduce
    for replica in replicas:
        graph = replica.graph
        for role in (Role.INPUT, Role.OUTPUT):
            k = _row(graph, reduce, role)
            # a slice of the column-parallel weight's gradient: split along the output features, whole [256, 64]
            assert (int(graph.shards.kind[k]), int(graph.shards.split_dim[k]), graph.tensors.shape[k]) == (
                SPLIT, 0, "[256, 64]")
    assert sorted(replicas[1].graph.shards.rank.tolist())[0] == 2  # replica 1 holds ranks 2 and 3


def test_a_clean_dp_job_agrees_on_every_replica(jobs, tmp_path):
    index = run_merged(jobs["clean"], jobs["bench"], tmp_path / "out", workers=1)
    assert [(run["replica"], run["ranks"]) for run in index["runs"]] == [(0, [0, 1]), (1, [2, 3])]
    assert index["analysis"]["origin"] is None
    assert all(run["summary"]["verdicts"].get("error", 0) == 0 for run in index["runs"])
    assert sorted(p.name for p in (tmp_path / "out").glob("*_merged.json")) == [
        "step0_replica0_merged.json", "step0_replica1_merged.json"]


def test_a_bad_card_on_the_second_replica_is_found_with_its_rank(jobs, tmp_path):
    index = run_merged(jobs["bad_replica"], jobs["bench"], tmp_path / "out", workers=1)
    origin = index["analysis"]["origin"]
    assert (origin["node"], origin["rank"], origin["replica"]) == ("Functional.layer_norm.2.forward", 3, 1)
    assert index["runs"][0]["first"] is None  # replica 0 agrees: only comparing every replica shows the bad card


@pytest.mark.parametrize("text, message", [
    ("tp=3", "needs ranks 0..2, the job has 4"),
    ("tp=1", "gives the TP groups [0] [1] [2] [3], but the ranks' all_reduce calls inside modules use [0,1] [2,3]"),
    ("tp=2,order=dp-tp-cp-ep-pp", "gives the TP groups [0,2] [1,3]"),
])
def test_a_stated_layout_the_dump_contradicts_is_refused_naming_the_input(jobs, tmp_path, text, message):
    from graphcmp.core.distributed.merged import MergeOptions

    options = MergeOptions(npu_layout=parse_layout(text))
    with pytest.raises(LayoutContradiction) as err:
        run_merged(jobs["clean"], jobs["bench"], tmp_path / "out", options=options, workers=1)
    assert str(err.value).startswith(f"{jobs['clean']}: --npu-layout contradicts the dump: ")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_replicas_the_bench_has_no_counterpart_of_are_listed_as_not_compared(jobs, tmp_path, parallel):
    from graphcmp.core.outcome import job_outcome

    bench = _dp_job(tmp_path / "bench1", [parallel / "tp1"])  # one replica only
    index = run_merged(jobs["clean"], bench, tmp_path / "out", workers=1)
    assert [run.get("replica") for run in index["runs"]] == [0]  # replica 0 against the bench's only one
    assert index["missing"]["npu_only"] == ["step0 data-parallel replica 1 (ranks 2,3)"]
    assert job_outcome(index).verdict != "agree"


def test_the_viewer_lists_every_replica_and_opens_on_the_bad_one(jobs, tmp_path):
    from graphcmp.app.results import open_results

    run_merged(jobs["bad_replica"], jobs["bench"], tmp_path / "out", workers=1)
    results = open_results([tmp_path / "out"])
    assert [(e.title, e.replica) for e in results.entries] == [("step 0 · replica 0", 0), ("step 0 · replica 1", 1)]
    assert results.start.replica == 1


def test_a_replica_reached_through_the_gradient_all_reduce_is_spread_not_an_origin():
    from graphcmp.core.distributed.merged import merged_analysis

    def entry(replica, node, position, rank):
        return {"step": 0, "replica": replica, "error": None,
                "first": {"node": node, "position": position, "rank": rank}}

    analysis = merged_analysis([entry(0, "Distributed.all_reduce.32.forward", 902, 0),
                                entry(1, "Tensor.__mul__.28.forward", 130, 3)])
    assert [(o["node"], o["rank"], o["replica"]) for o in analysis["origins"]] == [
        ("Tensor.__mul__.28.forward", 3, 1)]
    assert analysis["steps"]["0"]["spread"] == [{"rank": 0, "via": "Distributed.all_reduce.32.forward",
                                                 "from_rank": 3, "from_node": "Tensor.__mul__.28.forward"}]
    # a computation of its own on another replica is an origin of its own
    both = merged_analysis([entry(0, "Tensor.t.4.forward", 200, 1), entry(1, "Tensor.__mul__.28.forward", 130, 3)])
    assert [o["rank"] for o in both["origins"]] == [3, 1] and both["steps"]["0"]["spread"] == []
