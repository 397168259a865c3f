"""DDP over NCCL on two GPUs: the same specification as over gloo
(checkpointed DDP bitwise the plain DDP run). Registered everywhere,
Skipped with the reason where torch sees fewer than two CUDA devices."""
import pytest
import torch
import torch.distributed as dist
from models import Shared, batch_fn, nonreentrant, plain

import ckpt_verify

REASON = (f"NCCL needs 2 CUDA devices: torch {torch.__version__} sees {torch.cuda.device_count()}, "
          f"NCCL {'available' if dist.is_available() and dist.is_nccl_available() else 'absent'}")
pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_nccl_available()
                                     and torch.cuda.device_count() >= 2), reason=REASON)


def test_ddp_nonreentrant_over_nccl_is_bitwise_the_plain_ddp_run(tmp_path):
    report = ckpt_verify.verify(Shared, batch_fn, {"nonreentrant": nonreentrant}, baseline=plain, world_size=2,
                                parallel="ddp", backend="nccl", device="cuda", noise_runs=1,
                                out=str(tmp_path / "nccl.h5"))
    assert report["nonreentrant"] == "PASS", str(report)
