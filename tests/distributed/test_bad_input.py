"""Distributed arguments the ranks could not run are refused with one
BadInput line before any training, and nothing is written."""
import os

import pytest
import torch
from models import Stack, batch_fn, nonreentrant, plain

import ckpt_verify


def _verify(tmp_path, **kwargs):
    out = tmp_path / "r.h5"
    with pytest.raises(ckpt_verify.BadInput) as err:
        ckpt_verify.verify(Stack, batch_fn, {"mine": nonreentrant}, baseline=plain, out=str(out), **kwargs)
    assert os.listdir(tmp_path) == []
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_batch_that_does_not_split_evenly_is_refused(tmp_path):
    assert "cannot be split into 3 equal parts" in _verify(tmp_path, world_size=3)


def test_an_unknown_parallelism_is_refused(tmp_path):
    assert "parallel must be one of ddp, fsdp, fsdp2" in _verify(tmp_path, world_size=2, parallel="zero")


def test_a_timeout_that_is_not_a_positive_number_is_refused(tmp_path):
    assert "timeout must be" in _verify(tmp_path, world_size=2, timeout=0)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this machine could run NCCL")
def test_nccl_without_two_gpus_is_refused(tmp_path):
    assert "backend nccl needs 2 CUDA devices" in _verify(tmp_path, world_size=2, backend="nccl")


def test_a_run_name_without_room_for_its_twin_is_refused(tmp_path):
    out = tmp_path / "r.h5"
    with pytest.raises(ckpt_verify.BadRunName) as err:
        ckpt_verify.verify(Stack, batch_fn, {"n" * 50: nonreentrant}, baseline=plain, out=str(out), world_size=2)
    assert "shorten it" in str(err.value) and os.listdir(tmp_path) == []
