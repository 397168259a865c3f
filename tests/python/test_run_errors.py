"""pytest: a run that raises keeps its whole traceback, in the report, in
the Verdict and (its last frames) on stderr; a Python report's summary
describes the user's model, not the harness's."""
import json
import os
import sys

import h5py
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return F.mse_loss(self.fc(x), torch.zeros_like(x))


def model_fn():
    return Tiny()


def batch_fn(step):
    return torch.randn(2, 4)


def deep_helper_that_raises(x):
    raise ValueError("shape mismatch in the recompute")


def raising_step(model, batch):
    return deep_helper_that_raises(batch)


def test_an_error_run_keeps_its_full_traceback(tmp_path, capsys):
    out = str(tmp_path / "r.h5")
    report = ckpt_verify.verify(model_fn, batch_fn, {"boom": raising_step}, out=out)
    v = report.verdicts["boom"]
    assert v.verdict == "ERROR"
    assert "deep_helper_that_raises" in v.traceback and "ValueError: shape mismatch" in v.traceback
    assert v.traceback in v.detail and v.detail.startswith(v.reason)
    with h5py.File(out, "r") as f:
        stored = f["runs/boom"].attrs["traceback"]
    assert b"deep_helper_that_raises" in stored
    err = capsys.readouterr().err
    assert "in deep_helper_that_raises" in err and "ValueError: shape mismatch in the recompute" in err


def test_a_python_report_describes_the_users_model(tmp_path):
    out = str(tmp_path / "r.h5")
    report = ckpt_verify.verify(model_fn, batch_fn, {"plain": lambda m, b: m(b)}, out=out)
    with open(os.path.join(report.judge_dir, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    texts = [json.dumps(r.get("case_definition", "")) for r in summary["records"]]
    assert texts and all("test_run_errors.Tiny: 20 parameters in 2 tensors, dtype float32" in t for t in texts), texts
    assert not any("gelu_tanh" in t for t in texts), "the harness's default MLP is not the user's model"
