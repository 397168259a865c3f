"""Module state under DDP: every rank's buffers are recorded per step like
its gradients, so torch's checkpoint around a BatchNorm, whose recompute
updates the running statistics a second time, FAILs on the buffers."""
import re

import h5py
import pytest
from models import Normed, batch_fn, nonreentrant, plain

import ckpt_verify


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("state") / "state.h5"
    return ckpt_verify.verify(Normed, batch_fn, {"nonreentrant": nonreentrant}, baseline=plain, world_size=2,
                              parallel="ddp", noise_runs=1, against_single=False, out=str(out),
                              expect={"nonreentrant": "FAIL"})


def test_a_recompute_that_updates_batchnorm_again_fails_on_its_buffers(report):
    assert report["nonreentrant"] == "FAIL"
    # A FAIL over re-runs names its attempts first (docs/noise.md).
    assert re.match(r"^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/1/buffers/bn.num_batches_tracked",
                    report.verdicts["nonreentrant"].reason)


def test_each_rank_records_its_buffers(report):
    with h5py.File(report.path) as f:
        for rank in (0, 1):
            assert f[f"runs/ddp_baseline_0/ranks/{rank}/steps/1/buffers/bn.num_batches_tracked"][()] == 1
            assert f[f"runs/nonreentrant/ranks/{rank}/steps/1/buffers/bn.num_batches_tracked"][()] == 2
