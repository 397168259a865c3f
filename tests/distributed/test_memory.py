"""Memory judged rank by rank under DDP: each rank's bytes held at the end
of forward against the statement drawn from the same rank of the plain
DDP baseline's memory map. A correct non-reentrant checkpoint passes; a
checkpoint that keeps its forward graph and so saves nothing is MEMFAIL
naming the rank."""
import h5py
import pytest
import torch
from models import Shared, batch_fn, nonreentrant, plain

import ckpt_verify


def keeps_graph(model, batch):
    """'Checkpointed' by keeping everything: the plain step (nothing recomputed)."""
    return plain(model, batch)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_memory") / "ddp_memory.h5"
    return ckpt_verify.verify(
        Shared, batch_fn, {"nonreentrant": nonreentrant, "keeps_graph": keeps_graph},
        baseline=plain, world_size=2, parallel="ddp", noise_runs=0, out=str(out), against_single=False,
        expect={"keeps_graph": "MEMFAIL"})


def test_a_correct_checkpoint_holds_on_each_rank_what_its_statement_allows(report):
    assert report["nonreentrant"] == "PASS", report.verdicts["nonreentrant"].reason
    with h5py.File(report.path) as f:
        for rank in (0, 1):
            mem = f[f"runs/nonreentrant/ranks/{rank}/memory"].attrs
            assert mem["end_forward_bytes"] <= mem["stated_end_forward_bytes"]
            assert mem["recomputed_ops"] > 0


def test_a_run_that_recomputes_nothing_is_memfail_naming_the_rank(report):
    assert report["keeps_graph"] == "MEMFAIL"
    assert "rank 0 saves nothing" in report.verdicts["keeps_graph"].reason


def test_the_statement_is_never_a_maximum_over_ranks(report):
    with h5py.File(report.path) as f:
        assert "stated_end_forward_bytes" not in f["runs/nonreentrant/memory"].attrs
        assert torch.distributed.is_available()
