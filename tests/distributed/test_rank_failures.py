"""A rank that dies, hangs or raises is an ERROR naming the rank (and its
last message), within the timeout; of several ranks' errors the one that
caused the others is named first; the ranks are killed, none is left
behind."""
import multiprocessing
import time

import pytest
from models import Stack, batch_fn, plain, rank1_hangs, rank1_killed, rank1_raises

import ckpt_verify

TIMEOUT = 6


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    out = tmp_path_factory.mktemp("fail") / "fail.h5"
    start = time.monotonic()
    report = ckpt_verify.verify(Stack, batch_fn, {"killed": rank1_killed, "hangs": rank1_hangs,
                                                  "raises": rank1_raises},
                                baseline=plain, world_size=2, parallel="ddp", noise_runs=0, against_single=False,
                                timeout=TIMEOUT, out=str(out), expect={"killed": "ERROR", "hangs": "ERROR",
                                                                       "raises": "ERROR"})
    return report, time.monotonic() - start


def test_a_killed_rank_is_an_error_naming_it_and_its_last_message(timed):
    report, _ = timed
    assert report["killed"] == "ERROR"
    reason = report.verdicts["killed"].reason
    assert reason.startswith("rank 1 died (killed by SIGKILL); its last message: 'warm-up step: forward'"), reason


def test_a_hanging_rank_is_an_error_after_the_timeout(timed):
    report, _ = timed
    assert report["hangs"] == "ERROR"
    reason = report.verdicts["hangs"].reason
    assert reason.startswith(f"timed out after {TIMEOUT} s") and "rank 1 still running" in reason, reason


def test_the_rank_that_raised_is_named_before_the_errors_it_caused(timed):
    report, _ = timed
    assert report["raises"] == "ERROR"
    reason = report.verdicts["raises"].reason
    assert reason.startswith("rank 1: run raises, warm-up step: step_fn raised ValueError: rank 1's own mistake"), \
        reason


def test_the_harness_does_not_hang(timed):
    _, seconds = timed
    assert seconds < 4 * TIMEOUT + 30  # baselines, the killed run, the hang's timeout


def test_no_rank_is_left_running(timed):
    assert multiprocessing.active_children() == []
