"""pytest: a checkpoint's Run trains without a warm-up unless its first
step shows it needs one (frontends/eager.py ColdStart). A warm-up is a
whole unrecorded step that keeps what a Run's code brings up once per
process (a lazy cache, a workspace) out of its recorded bytes; the
baseline's warm-up already brought up the plain ops. So a checkpoint's
first training starts cold, and its step 1 is dropped, as the warm-up it
turned out to be, when the bytes it leaves after backward exceed the
baseline's: the run is trained again, warm, and judged as if it had
warmed up. Real runs, the counting allocator's exact bytes, the C judge."""
import os
import sys

import h5py
import pytest
import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from test_user_memory import Stack, stepper, verdict  # noqa: E402

import ckpt_verify  # noqa: E402
from ckpt_verify.frontends import eager  # noqa: E402

STEPS = 2
CACHE_FLOATS = 16384  # 64 KiB, far more than the bookkeeping floor


def model_fn():
    return Stack(width=32, blocks=2)


def batch_fn(step):
    return torch.randn(4, 16, 32), torch.randn(4, 16, 32)


plain = stepper(lambda block, x: block(x))
nonreentrant = stepper(lambda block, x: checkpoint(block, x, use_reentrant=False))


def counted(step_fn, calls):
    def step(model, batch):
        calls.append(1)
        return step_fn(model, batch)
    return step


def with_process_cache(cache, calls):
    """torch's non-reentrant checkpoint that, the first time it runs in the
    process, fills a process-wide cache (a library's lazily built table) and
    keeps it: state of the process, made once, not of any step."""
    def step(model, batch):
        calls.append(1)
        if "table" not in cache:
            cache["table"] = torch.zeros(CACHE_FLOATS)
        return nonreentrant(model, batch)
    return step


def _verify(tmp_path, name, calls):
    cache: dict = {}
    runs = {"checkpoint": counted(nonreentrant, calls.setdefault("checkpoint", [])),
            "process_cache": with_process_cache(cache, calls.setdefault("process_cache", []))}
    rep = ckpt_verify.verify(model_fn, batch_fn, runs, baseline=plain, steps=STEPS, noise_runs=0,
                             out=str(tmp_path / f"{name}.h5"))
    if rep.memory_source is None or "counting" not in rep.memory_source:
        pytest.skip(f"no exact memory figures here: {rep.memory_source}")
    return rep


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    calls: dict = {}
    return _verify(tmp_path_factory.mktemp("cold"), "cold", calls), calls


def _one_time(rep, run):
    with h5py.File(rep.path, "r") as f:
        return int(f[f"runs/{run}/memory"].attrs["one_time_bytes"])


def test_a_checkpoint_whose_first_step_brings_up_nothing_trains_without_a_warm_up(cold):
    rep, calls = cold
    assert len(calls["checkpoint"]) == STEPS
    assert verdict(rep, "checkpoint")[0] == "PASS", verdict(rep, "checkpoint")
    assert _one_time(rep, "checkpoint") == 0


def _start_bytes(rep, run):
    with h5py.File(rep.path, "r") as f:
        return f[f"runs/{run}/checks/step_start_bytes"][()].tolist()


def test_a_checkpoint_that_brings_up_process_state_in_its_first_step_is_trained_again_warm(cold):
    rep, calls = cold
    assert len(calls["process_cache"]) == 1 + STEPS  # the dropped step 1, then its recorded steps
    assert _one_time(rep, "process_cache") >= 4 * CACHE_FLOATS
    v, why = verdict(rep, "process_cache")
    assert v == "PASS" and "grew" not in why, why
    starts = _start_bytes(rep, "process_cache")
    assert starts == [starts[0]] * STEPS  # the cache predates step 1, as after a warm-up


def test_kept_cold_the_process_cache_would_be_growth_of_the_runs_own(tmp_path, monkeypatch):
    """The check the dropped attempt rests on: without it, the cache made in
    the recorded step 1 is the run's growth from step 1 to step 2, which the
    leak check then has to explain."""
    monkeypatch.setattr(eager.ColdStart, "check_step_1", lambda self, model, live, start: None)
    calls: dict = {}
    rep = _verify(tmp_path, "kept_cold", calls)
    assert len(calls["process_cache"]) == STEPS
    starts = _start_bytes(rep, "process_cache")
    assert starts[1] - starts[0] == 4 * CACHE_FLOATS
    assert f"grew +{4 * CACHE_FLOATS} B" in verdict(rep, "process_cache")[1]


def test_a_checkpoint_that_compiles_in_its_first_step_is_trained_again_and_mapped_once_eagerly(tmp_path):
    """A step that compiles at its first call (torch.compile made inside
    it): in the cold step 1, under the memory map's dispatch mode, Dynamo
    declines to compile it (and would skip its code from then on). The
    attempt is dropped, the code's Dynamo state reset, and the run warms up
    with no mode (where it compiles), gets its one eager mapped step
    (compiled code runs eagerly under the map), then trains compiled."""
    calls, compiled = [], {}

    def squared_error(x, y):
        return ((x - y) ** 2).mean()

    def plain_step(model, batch):
        x, y = batch
        for block in model.blocks:
            x = block(x)
        return squared_error(x, y)

    def compiles_lazily(model, batch):
        calls.append(1)
        x, y = batch
        for block in model.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        if "loss" not in compiled:  # backend "eager": ATen's own kernels, the baseline's bits
            compiled["loss"] = torch.compile(squared_error, backend="eager")
        return compiled["loss"](x, y)

    from torch._dynamo.utils import counters
    graphs = counters["stats"]["unique_graphs"]
    rep = ckpt_verify.verify(model_fn, batch_fn, {"compiles": compiles_lazily}, baseline=plain_step, steps=STEPS,
                             noise_runs=0, out=str(tmp_path / "compiles.h5"))
    if rep.memory_source is None or "counting" not in rep.memory_source:
        pytest.skip(f"no exact memory figures here: {rep.memory_source}")
    assert len(calls) == 1 + 1 + 1 + STEPS  # the dropped step 1, the warm-up, the eager mapped step, the steps
    assert verdict(rep, "compiles")[0] == "PASS", verdict(rep, "compiles")
    with h5py.File(rep.path, "r") as f:
        assert "mapped" not in f["runs/compiles/timing"].attrs  # its recorded steps ran without the map
    assert counters["stats"]["unique_graphs"] > graphs  # and it compiled (in its warm-up)
