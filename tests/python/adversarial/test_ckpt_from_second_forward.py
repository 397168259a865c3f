"""Bug class: a checkpoint that turns on from the model's second forward,
as an auto-AC that profiles step 1 and checkpoints from step 2 on. The
warm-up step is a model's first forward, so a probe of the warm-up alone
saw a plain baseline; the probe run trains every step of a fresh model
and sees step 2's recompute."""
import pytest
from adversarial_models import Net, batch_fn, broken, run_step

import ckpt_verify
from ckpt_verify import CheckpointInBaseline


class AutoAC(Net):
    """Plain on its first forward (the profiling step), then a checkpoint
    that recomputes without the RNG stash."""

    def __init__(self):
        super().__init__()
        self.forwards = 0

    def forward(self, x, y):
        self.forwards += 1
        self.wrap = broken if self.forwards >= 2 else None
        return super().forward(x, y)


def test_a_checkpoint_that_turns_on_from_the_second_forward_is_refused_naming_step_2(tmp_path):
    with pytest.raises(CheckpointInBaseline, match="in step 2, .*ran again with grad enabled.*a recompute"):
        ckpt_verify.verify(AutoAC, batch_fn, {"mine": run_step}, steps=2, out=str(tmp_path / "r.h5"))
    assert not (tmp_path / "r.h5").exists()
