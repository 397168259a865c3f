"""The probe's random-op finding counts ops that draw new numbers, not the
backward ops that replay the seed their forward drew (CUDA's
memory-efficient attention backward carries the nondeterministic_seeded
tag; a plain transformer baseline on a GPU runs it, and was refused)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from ckpt_verify.frontends.probe import _is_random  # noqa: E402

aten = torch.ops.aten


def test_an_attention_backward_replaying_its_forwards_seed_is_not_a_random_op():
    assert torch.Tag.nondeterministic_seeded in aten._scaled_dot_product_efficient_attention_backward.default.tags
    assert not _is_random(aten._scaled_dot_product_efficient_attention_backward.default)


def test_ops_that_draw_are_random_ops():
    assert _is_random(aten.bernoulli.default)
    assert _is_random(aten.native_dropout.default)
    assert _is_random(aten._scaled_dot_product_efficient_attention.default)


def test_a_deterministic_op_is_not_a_random_op():
    assert not _is_random(aten.addmm.default)
