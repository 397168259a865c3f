"""pytest: the Report that verify() returns behaves like what it is, and
verify() refuses up front what the judge would refuse after the training.

The runs are real: a tiny model with dropout, torch.utils.checkpoint, and
the C judge ($CKPT_VERIFY or the tree's build/ckpt-verify). A checkpoint
with preserve_rng_state=False draws other dropout masks in its recompute:
PyTorch's documented wrong gradients, FAIL."""
import gc
import json
import math
import os
import re
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify import BadInput  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x, wrap=None):
        def block(t):
            return F.dropout(F.gelu(self.a(t)), 0.2, training=True)
        h = wrap(block, x) if wrap else block(x)
        return self.b(h)


def model_fn():
    return Net()


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    return F.mse_loss(model(batch[0]), batch[1])


def nonreentrant(model, batch):
    return F.mse_loss(model(batch[0], lambda f, t: checkpoint(f, t, use_reentrant=False)), batch[1])


def no_rng_replay(model, batch):
    wrap = lambda f, t: checkpoint(f, t, use_reentrant=False, preserve_rng_state=False)  # noqa: E731
    return F.mse_loss(model(batch[0], wrap), batch[1])


RUNS = {"nonreentrant": nonreentrant, "no_rng_replay": no_rng_replay}


def verify(tmp_path, **kwargs):
    kwargs.setdefault("out", str(tmp_path / "r.h5"))
    return ckpt_verify.verify(model_fn, batch_fn, RUNS, baseline=plain, noise_runs=1, **kwargs)


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """no_rng_replay FAILs and nobody expected it: not ok."""
    return verify(tmp_path_factory.mktemp("failing"))


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    """The same FAIL, declared: ok."""
    return verify(tmp_path_factory.mktemp("declared"), expect={"no_rng_replay": "FAIL"})


def test_an_unexpected_fail_makes_the_report_false(failing):
    assert failing["no_rng_replay"] == "FAIL"
    assert not failing.ok
    assert not failing
    with pytest.raises(AssertionError):
        assert failing


def test_a_report_whose_verdicts_are_all_expected_is_true(declared):
    assert declared["no_rng_replay"] == "FAIL"
    assert declared.ok
    assert declared


def test_the_report_is_a_read_only_mapping_of_run_to_verdict(failing):
    assert list(failing) == ["nonreentrant", "no_rng_replay"]
    assert len(failing) == 2
    assert "nonreentrant" in failing and "baseline_0" not in failing
    assert dict(failing.items()) == {"nonreentrant": "PASS", "no_rng_replay": "FAIL"}
    assert list(failing.keys()) == ["nonreentrant", "no_rng_replay"]
    assert failing.get("missing") is None
    with pytest.raises(KeyError):
        failing["missing"]
    with pytest.raises(TypeError):
        failing["nonreentrant"] = "PASS"


def test_a_verdict_carries_the_distance_the_table_shows_and_the_raw_one_labelled(failing):
    caught, same = failing.verdicts["no_rng_replay"], failing.verdicts["nonreentrant"]
    assert caught.max_scaled_ulp > 0 and f"max scaled ULP {caught.max_scaled_ulp:.3g}" in caught.reason
    assert f" {caught.max_scaled_ulp:.3g} " in failing.table  # the table's scaled ULP column
    # the raw element-wise distance only labelled as such: the run's in the
    # summary, the diverging tensor's in the reason
    assert isinstance(caught.raw_max_ulp, int) and caught.record["raw_max_ulp"] == caught.raw_max_ulp
    assert re.search(r"its raw max ULP \d+", caught.reason) and "max_ulp" not in caught.record
    assert same.max_scaled_ulp == 0 and same.raw_max_ulp == 0


def test_the_repr_shows_ok_every_verdict_and_the_path(failing):
    text = repr(failing)
    assert text.startswith("<Report ok=False ")
    assert "'nonreentrant': PASS (expected PASS|NOISE): bitwise identical to baseline_0" in text
    assert "'no_rng_replay': FAIL (UNEXPECTED, expected PASS|NOISE): " in text
    assert failing.path in text


def _never_called():
    raise AssertionError("model_fn was called: the input should have been refused before any training")


@pytest.mark.parametrize("kwargs, message", [
    ({"tolerance": math.nan}, "tolerance must be a finite number >= 0"),
    ({"tolerance": math.inf}, "tolerance must be a finite number >= 0"),
    ({"min_memory_saving": -0.5}, "min_memory_saving must be a finite number >= 0"),
    ({"seed": -1}, "seed must be an integer in [0, 2**63)"),
    ({"seed": 2**63}, "seed must be an integer in [0, 2**63)"),
    ({"seed": True}, "seed must be an integer"),
    ({"lr": math.nan}, "lr must be a finite number > 0"),
])
def test_a_value_the_judge_would_refuse_is_refused_before_training(tmp_path, kwargs, message):
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("*", r"\*").replace(")", r"\)")):
        ckpt_verify.verify(_never_called, batch_fn, RUNS, out=str(tmp_path / "r.h5"), **kwargs)
    assert os.listdir(tmp_path) == []


def test_out_naming_an_existing_directory_is_refused_before_training(tmp_path):
    with pytest.raises(BadInput, match="is a directory"):
        ckpt_verify.verify(_never_called, batch_fn, RUNS, out=str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_without_out_the_temporary_report_goes_with_the_report(tmp_path):
    report = verify(tmp_path, out=None, expect={"no_rng_replay": "FAIL"})
    folder = os.path.dirname(report.path)
    assert os.path.isfile(report.path) and report.ok
    del report
    gc.collect()
    assert not os.path.exists(folder)


def test_the_summary_describes_the_users_model_not_the_harness_default(declared):
    with open(os.path.join(declared.judge_dir, "summary.json"), encoding="utf-8") as f:
        records = json.load(f)["records"]
    definition = records[0]["case_definition"]
    assert "test_report.model_fn" in definition["model_definition"]
    assert definition["framework"].startswith("pytorch ")
    assert "model" not in definition and "hidden" not in definition  # the harness's mlp defaults
