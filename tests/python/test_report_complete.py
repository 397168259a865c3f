"""pytest: a report verify() wrote cannot pass half-done (issue 38). Its
/case names every run it trains (`runs`), so the C judge makes a run the
file lacks, or holds only part of, an ERROR that fails the judge (exit 1),
the same as for the harness's own reports (tests/judge.cmake)."""
import os
import shutil
import subprocess
import sys

import h5py
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_report import RUNS, batch_fn, model_fn, plain  # noqa: E402

import ckpt_verify  # noqa: E402
from ckpt_verify.judge import find_judge  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("complete") / "r.h5")
    rep = ckpt_verify.verify(model_fn, batch_fn, RUNS, baseline=plain, out=out, expect={"no_rng_replay": "FAIL"},
                             noise_runs=1)
    assert rep.ok, rep
    return rep


def judge(path):
    binary = find_judge()
    if binary is None:
        pytest.skip("no ckpt-verify binary (set CKPT_VERIFY)")
    return subprocess.run([binary, "judge", path], capture_output=True, text=True)


def test_case_names_every_run_it_trains(report):
    with h5py.File(report.path, "r") as f:
        assert f["case"].attrs["runs"].decode() == ",".join(RUNS)


def test_a_run_deleted_from_the_report_is_an_error(report, tmp_path):
    cut = str(tmp_path / "cut.h5")
    shutil.copyfile(report.path, cut)
    with h5py.File(cut, "r+") as f:
        del f["runs/nonreentrant"]
    done = judge(cut)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run nonreentrant is named by /case but absent from" in done.stdout


def test_a_run_stopped_short_is_an_error(report, tmp_path):
    cut = str(tmp_path / "cut.h5")
    shutil.copyfile(report.path, cut)
    with h5py.File(cut, "r+") as f:
        del f["runs/nonreentrant/final_params"]
    done = judge(cut)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run nonreentrant is named by /case but incomplete in" in done.stdout
