"""pytest: arguments of the wrong type are the library's BadInput, one line
naming the argument, raised before anything is trained or written
(issue 49, item 7): baselines= that is not a mapping, Run(memory=...) that
is neither None nor 'judged', expect= that is not a mapping, and
against= naming no family of baselines=."""
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def refused(tmp_path, match, runs=None, **kwargs):
    """verify() raises BadInput (not a subclass of another error), its
    message one line matching `match`, and writes nothing."""
    out = tmp_path / "r.h5"
    with pytest.raises(ckpt_verify.BadInput, match=match) as caught:
        ckpt_verify.verify(lambda: torch.nn.Linear(8, 8), batch_fn, runs or {"mine": plain}, baseline=plain,
                           out=str(out), **kwargs)
    assert "\n" not in str(caught.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("given", ["compiled", ["compiled"], ("compiled", plain)])
def test_baselines_that_is_not_a_mapping_is_bad_input_naming_baselines(tmp_path, given):
    refused(tmp_path, rf"^baselines= is a {type(given).__name__}, not a mapping", baselines=given)


@pytest.mark.parametrize("memory", [np.array([1, 2]), torch.tensor([1.0, 2.0]), torch.tensor(1.0), ["judged"],
                                    "measured", 0])
def test_run_memory_that_is_neither_none_nor_judged_is_bad_input_naming_memory(memory):
    with pytest.raises(ckpt_verify.BadInput, match=r"^Run\(memory=.*\): 'judged' \(the default\) or None") as caught:
        ckpt_verify.Run(step=plain, memory=memory)
    assert "\n" not in str(caught.value)


def test_run_memory_none_and_judged_are_taken():
    assert ckpt_verify.Run(step=plain, memory=None).memory is None
    assert ckpt_verify.Run(step=plain).memory == "judged"


@pytest.mark.parametrize("given", ["FAIL", ["mine"]])
def test_expect_that_is_not_a_mapping_is_bad_input_naming_expect(tmp_path, given):
    refused(tmp_path, rf"^expect= is a {type(given).__name__}, not a mapping", expect=given)


@pytest.mark.parametrize("baselines", [None, {}, {"compiled": plain}])
def test_against_naming_no_family_is_bad_input_naming_against(tmp_path, baselines):
    refused(tmp_path, r"^run 'mine': against='eagerly' names no family of baselines=",
            runs={"mine": ckpt_verify.Run(step=plain, against="eagerly")}, baselines=baselines)
