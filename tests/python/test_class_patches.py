"""pytest: runs are isolated from what they change on the model's classes
(issue 49, item 4). A prepare() that patches Block.forward on the class
changes every Block, so every later run's model: each run starts from
the classes as verify() found them (put back after every run and before
every prepare), and a run that patched one is named in its reason
("run X patched Block.forward on the class"). A baseline that patches a
class is refused.

The runs are real (torch's checkpoint, the C judge)."""
import os
import sys

import h5py
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.fc(x))


ORIGINAL_FORWARD = Block.forward


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x, region=None):
        for b in self.blocks:
            x = region(b, x) if region else b(x)
        return x


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def nonreentrant(model, batch):
    x, y = batch
    return F.mse_loss(model(x, region=lambda fn, t: checkpoint(fn, t, use_reentrant=False)), y)


def patches_forward_wrongly(model):
    """A checkpoint applied by patching the class, with a bug: the block's
    output scaled by 1.5 (every later Block would compute it)."""
    def forward(self, x):
        return 1.5 * checkpoint(ORIGINAL_FORWARD, self, x, use_reentrant=False)
    Block.forward = forward


def patches_forward_rightly(model):
    """The same on the class, correct; called again for each fresh model it
    would wrap its own earlier patch if the class were not put back."""
    inner = Block.forward

    def forward(self, x):
        return checkpoint(inner, self, x, use_reentrant=False)
    Block.forward = forward
    Block.patched_by_run = True


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("class_patches") / "r.h5"
    try:
        report = ckpt_verify.verify(Net, batch_fn, {"patches": ckpt_verify.Run(prepare=patches_forward_wrongly),
                                                    "correct": nonreentrant,
                                                    "patches_rightly": ckpt_verify.Run(prepare=patches_forward_rightly),
                                                    "correct_after": nonreentrant},
                                    baseline=plain, out=str(out), expect={"patches": "FAIL"}, noise_runs=1)
        # The classes as verify() left them, before this fixture's own cleanup.
        report.classes_after = (Block.forward is ORIGINAL_FORWARD, hasattr(Block, "patched_by_run"))
        return report
    finally:
        Block.forward = ORIGINAL_FORWARD  # whatever happened, the next test's Block is the plain one
        if hasattr(Block, "patched_by_run"):
            del Block.patched_by_run


def test_a_correct_run_after_one_that_patched_the_class_passes(report):
    assert report["correct"] == "PASS", report.verdicts["correct"].reason
    assert report["correct_after"] == "PASS", report.verdicts["correct_after"].reason


def test_the_run_that_patched_the_class_keeps_its_own_verdict(report):
    assert report["patches"] == "FAIL", report.verdicts["patches"].reason
    assert report["patches_rightly"] == "PASS", report.verdicts["patches_rightly"].reason
    assert report.ok, str(report)


def test_a_run_that_patched_the_class_is_named_in_its_reason(report):
    assert "run patches patched Block.forward on the class" in report.verdicts["patches"].reason
    assert ("run patches_rightly patched Block.forward, Block.patched_by_run on the class"
            in report.verdicts["patches_rightly"].reason), report.verdicts["patches_rightly"].reason
    assert "patched" not in report.verdicts["correct"].reason


def test_the_report_names_the_patched_attributes_on_the_run(report):
    with h5py.File(report.path, "r") as f:
        text = f["runs/patches"].attrs["class_patches"]
        assert (text.decode() if isinstance(text, bytes) else text).startswith(
            "run patches patched Block.forward on the class")
        assert "class_patches" not in f["runs/correct"].attrs


def test_the_classes_are_as_verify_found_them_afterwards(report):
    assert report.classes_after == (True, False)


def test_a_baseline_that_patches_a_class_is_refused_and_puts_it_back(tmp_path):
    def patching_baseline(model, batch):
        Block.forward = lambda self, x: F.gelu(self.fc(x))
        return plain(model, batch)
    try:
        with pytest.raises(ckpt_verify.BadInput, match=r"^the plain baseline changes the model's classes: run "
                                                       r"baseline_0 patched Block.forward on the class"):
            ckpt_verify.verify(Net, batch_fn, {"correct": nonreentrant}, baseline=patching_baseline,
                               out=str(tmp_path / "r.h5"))
        assert Block.forward is ORIGINAL_FORWARD
    finally:
        Block.forward = ORIGINAL_FORWARD
