"""pytest: the mistakes of a user's first hour (issue 50) get one line that
names what the user wrote, what happened and the fix; a verdict prints
what it means; a report's runs keep the order they were given in.

The runs are real: a tiny model, torch.utils.checkpoint and the C judge
($CKPT_VERIFY or the tree's build/ckpt-verify)."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify import BadInput, CheckpointInBaseline, RunError  # noqa: E402


def model_fn():
    return nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Dropout(0.2), nn.Linear(8, 8))


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def mine(model, batch):
    x, y = batch
    return F.mse_loss(checkpoint(model, x, use_reentrant=False), y)


def no_rng(model, batch):
    x, y = batch
    return F.mse_loss(checkpoint(model, x, use_reentrant=False, preserve_rng_state=False), y)


def backward_inside(model, batch):
    loss = plain(model, batch)
    loss.backward()
    return loss


def _never_called(*args):
    raise AssertionError("called: the input should have been refused before")


def test_no_baseline_on_a_model_without_its_own_loss_says_to_give_one(tmp_path):
    with pytest.raises(BadInput) as e:
        ckpt_verify.verify(model_fn, batch_fn, {"mine": mine}, out=str(tmp_path / "r.h5"))
    message = str(e.value)
    assert "\n" not in message
    assert "no baseline= was given" in message and "model(*batch) with the batch's 2 items" in message
    assert "Sequential.forward(input)" in message
    assert "baseline=lambda model, batch: F.mse_loss(model(batch[0]), batch[1])" in message
    assert "step_fn raised" not in message
    assert not os.path.exists(tmp_path / "r.h5")


def test_a_step_that_calls_backward_itself_is_an_error_saying_to_return_the_loss(tmp_path, capsys):
    report = ckpt_verify.verify(model_fn, batch_fn, {"mine": mine, "twice": backward_inside}, baseline=plain,
                                noise_runs=0, out=str(tmp_path / "r.h5"), expect={"twice": "ERROR"})
    twice = report.verdicts["twice"]
    assert twice.verdict == "ERROR" and report.ok
    assert "step_fn called backward itself" in twice.reason
    assert "return the loss without calling loss.backward()" in twice.reason
    assert "a second time" not in twice.reason
    assert "a second time" not in capsys.readouterr().err
    assert report["mine"] == "PASS"


def test_a_baseline_that_calls_backward_itself_stops_verify_saying_so(tmp_path):
    with pytest.raises(RunError, match="run baseline_0, warm-up step: step_fn called backward itself"):
        ckpt_verify.verify(model_fn, batch_fn, {"mine": mine}, baseline=backward_inside,
                           out=str(tmp_path / "r.h5"))


def test_the_checkpointed_step_given_as_baseline_gets_a_fix_that_names_it(tmp_path):
    with pytest.raises(CheckpointInBaseline) as e:
        ckpt_verify.verify(model_fn, batch_fn, {"other": plain}, baseline=mine, out=str(tmp_path / "r.h5"))
    message = str(e.value)
    assert "if baseline=mine is your checkpointed step" in message and "runs={'mine': mine}" in message
    assert "prepare=enable)" not in message  # a name the user never defined
    assert "Run(prepare=lambda model: model.gradient_checkpointing_enable())" in message


def test_out_in_folders_that_do_not_exist_makes_them(tmp_path):
    out = tmp_path / "nodir" / "sub" / "w.h5"
    report = ckpt_verify.verify(model_fn, batch_fn, {"mine": mine}, baseline=plain, noise_runs=0, out=str(out))
    assert report.ok and out.is_file() and report.path == str(out)


def test_out_under_a_file_is_refused_before_training(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(BadInput, match="afile exists and is not a directory"):
        ckpt_verify.verify(_never_called, batch_fn, {"mine": mine}, baseline=plain,
                           out=str(tmp_path / "afile" / "sub" / "w.h5"))


def test_folders_made_for_out_are_removed_when_nothing_is_written(tmp_path):
    def raising_baseline(model, batch):
        raise ValueError("planted")

    with pytest.raises(RunError):
        ckpt_verify.verify(model_fn, batch_fn, {"mine": mine}, baseline=raising_baseline,
                           out=str(tmp_path / "nodir" / "sub" / "w.h5"))
    assert os.listdir(tmp_path) == []
