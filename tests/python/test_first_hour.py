"""pytest: the mistakes of a user's first hour (issue 50) get one line that
names what the user wrote, what happened and the fix; a verdict prints
what it means; a report's runs keep the order they were given in.

The runs are real: a tiny model, torch.utils.checkpoint and the C judge
($CKPT_VERIFY or the tree's build/ckpt-verify)."""
import json
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


@pytest.fixture(scope="module")
def surprising(tmp_path_factory):
    """no_rng FAILs as expected; "mine" is declared FAIL but PASSes; zeta
    (a plain control run) comes first, the expected ones after it."""
    out = tmp_path_factory.mktemp("surprising") / "r.h5"
    runs = {"zeta": ckpt_verify.Run(step=plain, memory=None), "mine": mine, "no_rng": no_rng}
    return ckpt_verify.verify(model_fn, batch_fn, runs, baseline=plain, noise_runs=0, out=str(out),
                              expect={"no_rng": "FAIL", "mine": "FAIL|MEMFAIL"})


def test_a_verdict_prints_its_verdict_what_was_expected_and_why(surprising):
    text = str(surprising.verdicts["mine"])
    reason = surprising.verdicts["mine"].reason.split("\n")[0]
    assert text == f"mine: PASS (UNEXPECTED, expected FAIL|MEMFAIL): {reason}"
    assert reason.startswith("bitwise identical to baseline_0")
    assert repr(surprising.verdicts["no_rng"]).startswith("Verdict(no_rng: FAIL (expected FAIL): ")


def test_the_reports_repr_shows_each_verdict_what_was_expected_and_why(surprising):
    text = repr(surprising)
    assert text.startswith("<Report ok=False {'zeta': PASS (expected PASS|NOISE): bitwise identical to baseline_0")
    assert "'mine': PASS (UNEXPECTED, expected FAIL|MEMFAIL): bitwise identical" in text
    assert "'no_rng': FAIL (expected FAIL): " in text


def test_runs_are_listed_in_the_order_given_not_expected_ones_first(surprising):
    assert list(surprising) == ["zeta", "mine", "no_rng"]
    rows = [line.split()[0] for line in surprising.table.splitlines()
            if line.split() and line.split()[0] in surprising]
    assert rows == ["zeta", "mine", "no_rng"], surprising.table
    with open(os.path.join(surprising.judge_dir, "summary.json"), encoding="utf-8") as f:
        records = json.load(f)["records"]
    assert [r["impl"] for r in records] == ["zeta", "mine", "no_rng"]


def _shared_block(model, batch, wrap=lambda m, x: m(x)):
    """Both halves of the batch through the model, one graph, one backward."""
    x, y = batch
    return sum(F.mse_loss(wrap(model, x[i:i + 2]), y[i:i + 2]) for i in (0, 2))


def _reentrant_holding_more(model, batch):
    """torch's reentrant checkpoint on a block two micro-batches share (its
    hooks fire twice per backward) that also keeps 1 MiB in its graph
    until backward, more than its memory statement allows."""
    held = torch.ones(1 << 18, requires_grad=True)
    loss = _shared_block(model, batch, lambda m, x: checkpoint(m, x.requires_grad_(), use_reentrant=True))
    return loss + 0.0 * (held * held).sum()


def test_a_run_failing_a_hook_count_that_also_holds_too_much_reports_both(tmp_path):
    report = ckpt_verify.verify(model_fn, batch_fn, {"both": _reentrant_holding_more}, baseline=_shared_block,
                                noise_runs=0, out=str(tmp_path / "r.h5"), expect={"both": "FAIL"})
    both = report.verdicts["both"]
    assert both.verdict == "FAIL" and report.ok  # the first finding decides
    assert both.reason.startswith("gradients bitwise identical to baseline_0, but the gradient hook of parameter")
    # The memory finding follows, naming the step and the tensor it holds.
    assert "; also MEMFAIL: step 1: holds " in both.reason and "aten.ones#0 (1048576 B)" in both.reason
    assert both.first_divergence.startswith("checks/hook_fires/")


def test_a_batchnorm_count_that_differs_is_told_as_values_not_ulps(tmp_path):
    """torch's checkpoint recomputes a BatchNorm in backward: its
    num_batches_tracked (int64) counts 2 where the plain step counts 1."""
    def bn_model():
        return nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 8))

    report = ckpt_verify.verify(bn_model, batch_fn, {"mine": mine}, baseline=plain, noise_runs=0,
                                out=str(tmp_path / "r.h5"), expect={"mine": "FAIL"})
    reason = report.verdicts["mine"].reason
    assert "steps/1/buffers/1.num_batches_tracked: its 2 baselines agree bitwise, mine's values differ: 1 vs 2" \
        in reason, reason
    assert "an integer tensor, compared as values" in reason
    assert "differs by 1 scaled ULP" not in reason and "raw max ULP 1)" not in reason
    assert report.verdicts["mine"].first_divergence.startswith("steps/1/buffers/1.num_batches_tracked [] (1 vs 2;")
