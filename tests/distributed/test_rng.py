"""Dropout with per-rank RNG under DDP: rank r draws from seed + r; the
checkpoint's RNG stash replays each rank's own stream (PASS), and a
checkpoint that replays rank 0's stream on every rank is FAIL."""
import pytest
from models import Stack, batch_fn, nonreentrant, plain, rng_stash_from_rank0, rng_stash_own

import ckpt_verify


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rng") / "rng.h5"
    # Against one process nothing can be claimed with dropout: one process
    # draws one mask for the whole batch, the ranks one each (docs/distributed.md).
    return ckpt_verify.verify(lambda: Stack(dropout=0.25), batch_fn,
                              {"torch_nonreentrant": nonreentrant, "stash_own": rng_stash_own,
                               "stash_from_rank0": rng_stash_from_rank0},
                              baseline=plain, world_size=2, parallel="ddp", noise_runs=1, against_single=False,
                              out=str(out), expect={"stash_from_rank0": "FAIL"})


def test_torch_checkpoint_replays_each_ranks_stream(report):
    assert report["torch_nonreentrant"] == "PASS"


def test_a_stash_of_the_ranks_own_state_passes(report):
    assert report["stash_own"] == "PASS"


def test_replaying_rank_0s_stream_on_every_rank_fails(report):
    assert report["stash_from_rank0"] == "FAIL"
    assert "its 2 baselines agree bitwise" in report.verdicts["stash_from_rank0"].reason
