"""Bug class: a checkpoint that turns on only for longer sequences than
batch 1 has (a memory-budget heuristic). The probe run trains on the real
batches, so step 2's longer batch is seen recomputing."""
import pytest
import torch
from adversarial_models import Net, broken, run_step

import ckpt_verify
from ckpt_verify import CheckpointInBaseline


class BudgetAC(Net):
    """Checkpoints (without the RNG stash) when a batch has more than 8 tokens."""

    def forward(self, x, y):
        self.wrap = broken if x.shape[1] > 8 else None
        return super().forward(x, y)


def growing_batches(step):
    """Batch 1 has 4 tokens, batch 2 has 16: sequence-length warm-up."""
    seq = 4 if step == 1 else 16
    return torch.randn(2, seq, 8), torch.randn(2, seq, 8)


def test_a_checkpoint_only_for_long_sequences_is_refused_naming_the_step_of_the_long_batch(tmp_path):
    with pytest.raises(CheckpointInBaseline, match="in step 2, .*a recompute"):
        ckpt_verify.verify(BudgetAC, growing_batches, {"mine": run_step}, steps=2, out=str(tmp_path / "r.h5"))
    assert not (tmp_path / "r.h5").exists()
