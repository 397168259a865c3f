"""pytest: with no baseline= the model computes its own loss, and an
output that carries one (a transformers ModelOutput, a mapping with
"loss") is reduced to it; a default baseline that yields no scalar loss
is refused with a message that names it and gives the fix."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402

VOCAB, SEQ, BATCH = 64, 8, 2


def tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32,
                                                                n_layer=2, n_head=2))


def token_batch(step):
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone(), "use_cache": False}


def enable_non_reentrant(model):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def test_hugging_face_as_documented_passes_without_a_baseline(tmp_path):
    tiny_gpt2()  # skips where transformers is missing
    report = ckpt_verify.verify(tiny_gpt2, token_batch, {"hf": ckpt_verify.Run(prepare=enable_non_reentrant)},
                                out=str(tmp_path / "hf.h5"), noise_runs=1)
    assert report.verdicts["hf"].verdict == "PASS", report.verdicts["hf"].reason


class DictLoss(torch.nn.Module):
    """Returns a mapping that holds its loss beside other outputs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return {"logits": y, "loss": F.mse_loss(y, torch.zeros_like(y))}


class Logits(torch.nn.Module):
    """Returns its outputs, no loss."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


def test_the_default_baseline_takes_the_loss_of_a_mapping():
    model = DictLoss()
    x = torch.randn(2, 4)
    assert torch.equal(ckpt_verify.default_baseline(model, x), model(x)["loss"])


def test_the_default_baseline_takes_a_loss_attribute():
    class Output:
        def __init__(self, loss):
            self.loss, self.logits = loss, None

    class Model(torch.nn.Module):
        def forward(self, x):
            return Output(x.sum())

    x = torch.randn(3)
    assert torch.equal(ckpt_verify.default_baseline(Model(), x), x.sum())


def test_a_default_baseline_without_a_scalar_loss_names_itself_and_the_fix(tmp_path):
    with pytest.raises(ckpt_verify.NonScalarLoss) as e:
        ckpt_verify.verify(Logits, lambda step: torch.randn(2, 4), {"mine": lambda m, b: m(b).sum()},
                           out=str(tmp_path / "r.h5"))
    message = str(e.value)
    assert "the default baseline" in message and "no baseline= was given" in message
    assert "baseline=lambda m, b: m(**b).loss" in message


def test_a_step_fn_without_a_scalar_loss_is_not_called_the_default_baseline(tmp_path):
    with pytest.raises(ckpt_verify.NonScalarLoss) as e:
        ckpt_verify.verify(Logits, lambda step: torch.randn(2, 4), {"mine": lambda m, b: m(b).sum()},
                           baseline=lambda m, b: m(b), out=str(tmp_path / "r.h5"))
    assert "step_fn returned" in str(e.value) and "default baseline" not in str(e.value)
