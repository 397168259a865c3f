"""pytest: runs stream into the report (docs/schema.md, "Identical tensors
stored once"; issue 30). A tensor bitwise equal to the reference run's is a
hard link to its dataset (a re-run's tensor equal to its run's, to the
run's), every dataset carries the CRC-32 of its bytes, a
run is kept whole or as an ERROR run and never half-written, and a training
that cannot fit the memory limit is refused before it starts.

The runs are real: the tiny dropout model of test_report.py, torch's
checkpoint, and the C judge."""
import io
import os
import sys
import zlib

import h5py
import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_report import RUNS, batch_fn, model_fn, plain  # noqa: E402

import ckpt_verify  # noqa: E402
from ckpt_verify import BadInput  # noqa: E402
from ckpt_verify.frontends.eager import (  # noqa: E402
    Run,  # noqa: E402
    Spec,
    model_state,
)
from ckpt_verify.frontends.eager import train as train_eager  # noqa: E402
from ckpt_verify.memory import NoMeter  # noqa: E402
from ckpt_verify.progress import QuietProgress, TerminalProgress, for_stderr  # noqa: E402
from ckpt_verify.recorder import Recorder, RunRecord, same_results  # noqa: E402


def datasets(group):
    out = {}
    group.visititems(lambda p, o: out.__setitem__(p, o) if isinstance(o, h5py.Dataset) else None)
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("stream") / "r.h5")
    rep = ckpt_verify.verify(model_fn, batch_fn, RUNS, baseline=plain, out=out,
                             expect={"no_rng_replay": "FAIL"}, noise_runs=1)
    assert rep.ok, rep
    return rep


def test_a_passing_run_is_made_of_links_to_baseline_0(report):
    with h5py.File(report.path, "r") as f:
        ref = datasets(f["runs/baseline_0"])
        run = datasets(f["runs/nonreentrant"])
        results = [p for p in run if not p.startswith("checks/")]
        assert results and all(run[p].id == ref[p].id for p in results)


def test_a_failing_run_stores_its_differing_tensors_anew(report):
    with h5py.File(report.path, "r") as f:
        ref = datasets(f["runs/baseline_0"])
        run = datasets(f["runs/no_rng_replay"])
        differing = [p for p in run if p in ref and run[p].id != ref[p].id and not p.startswith("checks/")]
        assert differing
        assert any(not np.array_equal(run[p][()], ref[p][()]) for p in differing)


def test_every_dataset_carries_the_crc32_of_its_bytes(report):
    with h5py.File(report.path, "r") as f:
        for run in f["runs"]:
            for path, d in datasets(f[f"runs/{run}"]).items():
                assert d.attrs["crc32"].dtype == np.int64, (run, path)
                assert int(d.attrs["crc32"]) == zlib.crc32(d[()].tobytes()), (run, path)


def test_the_planted_bug_still_fails_with_its_first_divergence(report):
    assert report["no_rng_replay"] == "FAIL"
    assert report.verdicts["no_rng_replay"].first_divergence


def test_a_run_identical_to_its_reference_is_not_re_run(report):
    with h5py.File(report.path, "r") as f:
        runs = list(f["runs"])
    assert "nonreentrant_rerun_1" not in runs and "no_rng_replay_rerun_1" in runs


def test_a_re_run_that_repeats_its_failing_run_is_made_of_links_to_the_run(report):
    with h5py.File(report.path, "r") as f:
        ref = datasets(f["runs/baseline_0"])
        run = datasets(f["runs/no_rng_replay"])
        rerun = datasets(f["runs/no_rng_replay_rerun_1"])
        results = [p for p in rerun if not p.startswith("checks/")]
        assert results and all(rerun[p].id == run[p].id for p in results)
        assert any(rerun[p].id != ref[p].id for p in results)  # linked to the run, not to the reference
    # judged as before: both attempts differ, each read as a whole tensor
    assert "differs in 2 of 2 attempts" in report.verdicts["no_rng_replay"].reason


def test_the_estimate_is_on_the_report(report):
    est = report.estimate
    params = sum(p.numel() for p in model_fn().parameters())
    assert est.params == params and est.param_bytes == 4 * params
    assert est.report_best < est.report_worst


def _spec(tmp_path):
    torch.manual_seed(0)  # as verify() seeds before building its first model
    first = model_fn()
    return Spec(model_fn, [batch_fn(1), batch_fn(2)], 2, 0, 0.01, "cpu", NoMeter("test"), model_state(first))


def _recorder(tmp_path):
    params = dict(model_fn().named_parameters())
    return Recorder.create(str(tmp_path / "r.h5"), {"case": "t"}, {"name": "t"}, {}, params)


def test_a_run_that_raises_midway_is_kept_with_what_it_wrote_as_an_error_run(tmp_path):
    calls = []

    def breaks_in_step_2(model, batch):
        calls.append(1)
        if len(calls) == 3:  # warm-up, step 1, then step 2
            raise RuntimeError("recompute lost its handle")
        return plain(model, batch)

    spec = _spec(tmp_path)
    from ckpt_verify.verify import _train_baseline, _train_or_error
    with _recorder(tmp_path) as rec:
        _train_baseline(spec, Run(step=plain), 0, rec, train_eager)
        writer = _train_or_error(spec, Run(step=breaks_in_step_2), "crashes", rec)
        assert writer.attrs["outcome"] == "error"
    with h5py.File(tmp_path / "r.h5", "r") as f:
        g = f["runs/crashes"]
        assert g.attrs["outcome"] == b"error"
        assert "steps/1/loss" in g and "steps/2" not in g and "final_params" not in g


def test_each_run_warms_up_once_and_its_later_runs_find_the_process_warm(tmp_path):
    calls = []

    def counted(model, batch):
        calls.append(1)
        return plain(model, batch)

    spec = _spec(tmp_path)
    from ckpt_verify.verify import _train_baseline
    baseline = Run(step=counted)
    with _recorder(tmp_path) as rec:
        _train_baseline(spec, baseline, 0, rec, train_eager)
        assert len(calls) == 1 + spec.steps  # the warm-up, then the recorded steps
        _train_baseline(spec, baseline, 1, rec, train_eager)
        assert len(calls) == 1 + 2 * spec.steps  # baseline_1: no second warm-up; its own steps carry the probe
        _train_baseline(spec, Run(step=counted), 2, rec, train_eager)
        assert len(calls) == 2 + 3 * spec.steps  # another Run warms up for itself


def _baseline_figures(path, run):
    with h5py.File(path, "r") as f:
        run = f[f"runs/{run}"]
        memory = {k: int(v) for k, v in run["memory"].attrs.items()} if "memory" in run else {}
        starts = run["checks/step_start_bytes"][()].tolist() if "checks/step_start_bytes" in run else None
        return memory, starts, sorted(run["timing"].attrs)


def test_the_probe_changes_no_recorded_figure(tmp_path, monkeypatch):
    """baseline_0's and baseline_1's memory figures (the counting
    allocator's exact bytes, baseline_1's mapped steps, which every
    statement is drawn from) and step-start bytes are those of a verify()
    without the recompute probe on baseline_1's steps and without the
    generator watch of the recorded steps, and their timing has the same
    figures: neither is measured."""
    from ckpt_verify.frontends import eager, probe
    with_probe = ckpt_verify.verify(model_fn, batch_fn, {"same": plain}, baseline=plain, noise_runs=1,
                                    out=str(tmp_path / "with.h5"))
    if with_probe.memory_source is None or "counting" not in with_probe.memory_source:
        pytest.skip(f"no exact memory figures here: {with_probe.memory_source}")

    class NoProbe:  # the probe's calls, no dispatch mode
        forward_random: list = []

        def __init__(self, generators=True):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def step_starts(self, step):
            pass

        def backward_starts(self):
            pass

        def backward_ends(self):
            pass

        def finding(self):
            return ""

    monkeypatch.setattr(eager.probe, "RecomputeProbe", NoProbe)
    monkeypatch.setattr(probe.GeneratorWatch, "before", lambda self: None)
    monkeypatch.setattr(probe.GeneratorWatch, "changed", lambda self: [])
    without = ckpt_verify.verify(model_fn, batch_fn, {"same": plain}, baseline=plain, noise_runs=1,
                                 out=str(tmp_path / "without.h5"))
    for run in ("baseline_0", "baseline_1"):
        assert _baseline_figures(with_probe.path, run) == _baseline_figures(without.path, run), run


def test_the_probe_run_and_the_baseline_leave_the_batches_as_they_were(tmp_path):
    """A baseline step that changes its batch in place is refused, and
    neither the probe run nor the baseline's own training changed the
    batches every run starts from: both trained on copies."""
    def shifts_its_input(model, batch):
        batch[0].add_(1.0)
        return plain(model, batch)

    spec = _spec(tmp_path)
    before = [b[0].clone() for b in spec.batches]
    from ckpt_verify.verify import _train_baseline
    with _recorder(tmp_path) as rec, pytest.raises(BadInput, match="the plain baseline changes its batch"):
        _train_baseline(spec, Run(step=shifts_its_input), 0, rec, train_eager)
    assert all(torch.equal(b[0], was) for b, was in zip(spec.batches, before))


def test_a_run_stopped_by_anything_else_leaves_no_trace_in_the_report(tmp_path):
    def interrupted(model, batch):
        raise KeyboardInterrupt

    spec = _spec(tmp_path)
    from ckpt_verify.verify import _train_baseline, _train_or_error
    rec = _recorder(tmp_path)
    _train_baseline(spec, Run(step=plain), 0, rec, train_eager)
    with pytest.raises(KeyboardInterrupt):
        _train_or_error(spec, Run(step=interrupted), "stopped", rec)
    assert not rec.has_run("stopped") and rec.has_run("baseline_0")
    rec.commit()


def test_a_tensor_differing_from_the_reference_in_one_bit_is_stored_anew(tmp_path):
    with _recorder(tmp_path) as rec:
        ref = RunRecord("baseline_0")
        ref.add("steps/1/loss", torch.tensor(1.0))
        ref.add("final_params/w", torch.ones(4))
        rec.add(ref)
        twin = RunRecord("twin")
        twin.add("steps/1/loss", torch.tensor(1.0))
        bits = torch.ones(4)
        bits.view(torch.int32)[2] ^= 1  # one ULP in one element
        twin.add("final_params/w", bits)
        w = rec.add(twin)
        assert not w.identical
        f = rec.file
        assert f["runs/twin/steps/1/loss"].id == f["runs/baseline_0/steps/1/loss"].id
        assert f["runs/twin/final_params/w"].id != f["runs/baseline_0/final_params/w"].id
        assert not same_results(f, "baseline_0", "twin")


def test_a_tensor_with_the_same_bytes_but_another_schema_dtype_is_not_linked(tmp_path):
    with _recorder(tmp_path) as rec:
        ref = RunRecord("baseline_0")
        ref.add("steps/1/buffers/b", torch.tensor([1, 0], dtype=torch.uint8))
        rec.add(ref)
        other = RunRecord("other")
        other.add("steps/1/buffers/b", torch.tensor([True, False]))  # stored as uint8 too
        rec.add(other)
        assert rec.file["runs/other/steps/1/buffers/b"].id != rec.file["runs/baseline_0/steps/1/buffers/b"].id


def test_a_run_of_another_family_links_to_that_familys_first_run(tmp_path):
    with _recorder(tmp_path) as rec:
        for name, baselines in (("baseline_0", None), ("te_baseline_0", None), ("mine", "te_baseline")):
            r = RunRecord(name)
            r.add("steps/1/loss", torch.tensor(2.0 if name != "baseline_0" else 1.0))
            rec.add(r, {"baselines": baselines} if baselines else None)
        f = rec.file
        assert f["runs/mine/steps/1/loss"].id == f["runs/te_baseline_0/steps/1/loss"].id
        assert f["runs/mine"].attrs["baselines"] == b"te_baseline"


def test_a_training_that_cannot_fit_the_memory_limit_is_refused_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_MEMORY_LIMIT", "1K")
    out = tmp_path / "r.h5"
    with pytest.raises(BadInput, match=r"needs at least .* more than the 1\.0 KiB CKPT_MEMORY_LIMIT; nothing run"):
        ckpt_verify.verify(model_fn, batch_fn, RUNS, baseline=plain, out=str(out))
    assert not out.exists() and not (tmp_path / "r.h5.tmp").exists()


def test_a_malformed_memory_limit_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_MEMORY_LIMIT", "lots")
    with pytest.raises(BadInput, match="CKPT_MEMORY_LIMIT='lots': not a byte count"):
        ckpt_verify.verify(model_fn, batch_fn, RUNS, baseline=plain, out=str(tmp_path / "r.h5"))


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_shown_on_a_terminal_and_nothing_off_one():
    assert isinstance(for_stderr(stream=io.StringIO()), QuietProgress)
    tty = _Tty()
    p = for_stderr(runs_hint=3, stream=tty)
    assert isinstance(p, TerminalProgress)
    p.step("baseline_0", 1, 2)
    p.close()
    assert "baseline_0 [#.] step 1/2" in tty.getvalue()


def test_once_a_run_differs_a_tensor_whose_checksum_differs_is_not_read_back(tmp_path, monkeypatch):
    """A run that has differed from baseline_0 (a bug's divergence spreads)
    tells its later tensors apart by checksum, which a new dataset needs
    anyway; baseline_0's is read back only when the checksums agree, and an
    equal tensor is still a link."""
    from ckpt_verify import recorder
    reads = []
    real = recorder._bytes_equal
    monkeypatch.setattr(recorder, "_bytes_equal", lambda a, b: reads.append(1) or real(a, b))
    a, b, c = torch.arange(6.0), torch.ones(4), torch.zeros(3)
    with _recorder(tmp_path) as rec:
        ref = rec.begin_run("baseline_0")
        for path, t in (("steps/1/loss", a), ("steps/1/grads/w", b), ("steps/1/grads/v", c)):
            ref.add(path, t)
        ref.finish()
        run = rec.begin_run("bug")
        run.add("steps/1/loss", a + 1)        # differs: read back, as a passing run's would be
        run.add("steps/1/grads/w", b * 2)     # differs by checksum: no read
        run.add("steps/1/grads/v", c.clone())  # checksums agree: read back, and linked
        run.finish()
        assert len(reads) == 2
        f = rec.file
        assert f["runs/bug/steps/1/grads/v"].id == f["runs/baseline_0/steps/1/grads/v"].id
        assert f["runs/bug/steps/1/grads/w"].id != f["runs/baseline_0/steps/1/grads/w"].id
        assert not run.identical
