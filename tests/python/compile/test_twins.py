"""The `_vs_eager` twins (issue 39; docs/compile.md): a twin takes no
expectation from its run, so a planted compiled run expected to FAIL
leaves the report ok, its twin saying it was not judged (the run's own
FAIL explains any difference from eager) whatever it measured there; a
correct compiled run's twin is NOISE, and its reason says what it
compared (the eager baselines and the plain compiled step: a different
compiler, whose rounding differs by construction); `ckpt-verify judge` on
the report gives the same verdicts.

The family's compiler is aot_eager with a partitioner that, after the
usual partition, makes the backward's matmuls accumulate in float64
(`rounding_otherwise`): a compiler that rounds otherwise than eager, in
seconds, where Inductor's would take its C++ compile. The planted run is
the same checkpoint compiled by plain aot_eager: bitwise eager, so
against its family (every tensor the matmuls touch differs by an ULP or
so) it FAILs, while against eager it measures PASS, the case where an
inherited expectation made report.ok False."""
import os
import subprocess

import compile_cases as cc
import pytest
import torch

import ckpt_verify
from ckpt_verify import compile_evidence, judge

R = ckpt_verify.Run
HIDDEN = 32


def _mm_f64(a, b):
    return torch.mm(a.double(), b.double()).to(a.dtype)


def rounding_otherwise():
    """A partition_fn: min_cut_rematerialization_partition, then every
    aten.mm of the backward graph accumulated in float64 and rounded once."""
    from functorch.compile import min_cut_rematerialization_partition

    def partition(joint, joint_inputs, **kwargs):
        fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)
        for node in bw.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.aten.mm.default:
                node.target = _mm_f64
        bw.recompile()
        return fw, bw
    return partition


ROUNDING = compile_evidence.backend("aot_eager", rounding_otherwise())


def rounding_compiled(model):
    return torch.compile(model, backend=ROUNDING)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("twins") / "twins.h5"
    return ckpt_verify.verify(
        lambda: cc.Net(0.0, HIDDEN, 2), lambda step: (torch.randn(4, 16, HIDDEN), torch.randn(4, 16, HIDDEN)),
        {"mine": R(prepare=cc.then(cc.checkpointed, rounding_compiled), against="compiled"),
         "planted_eager_rounding": R(prepare=cc.then(cc.checkpointed, cc.compiled()), against="compiled")},
        baselines={"compiled": R(prepare=rounding_compiled)}, expect={"planted_eager_rounding": "FAIL"},
        steps=2, noise_runs=0, out=str(out), name="twins")


def test_an_expected_fail_leaves_the_report_ok(report):
    assert report["planted_eager_rounding"] == "FAIL", report.verdicts["planted_eager_rounding"].reason
    assert report.ok, str(report)


def test_the_twin_of_a_failing_run_is_not_judged_and_says_why(report):
    twin = report.verdicts["planted_eager_rounding_vs_eager"]
    assert twin.expected
    assert twin.reason == ("not judged: planted_eager_rounding is itself FAIL against compiled_baseline_0 (expected), "
                           "which explains any difference from this family (measured here: PASS)"), twin.reason


def test_a_correct_runs_twin_is_noise_and_says_what_it_compared(report):
    assert report["mine"] == "PASS", report.verdicts["mine"].reason
    twin = report.verdicts["mine_vs_eager"]
    assert twin.verdict == "NOISE", twin.reason
    assert twin.reason.startswith(
        "this run under aot_eager vs eager (compiled_or_eager_baseline_<k>: the eager baselines and the plain step "
        "under aot_eager, a different compiler whose rounding differs by construction): no further from eager than "
        "that plain step is; every tensor within 16x its own spread over 4 baselines"), twin.reason
    assert "kernel non-determinism" not in twin.reason


def test_ckpt_verify_judge_on_the_file_gives_the_same_verdicts(report, tmp_path):
    out = subprocess.run([judge.find_judge(), "judge", "--out", str(tmp_path), report.path],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert out.returncode == 0, out.stdout
    again = judge.parse_summary(os.path.join(tmp_path, "summary.json"), "twins")
    assert {r: (v.verdict, v.expected, v.reason) for r, v in again.items()} == \
        {r: (v.verdict, v.expected, v.reason) for r, v in report.verdicts.items()}
