"""verify_jax refuses what the judge or the report would refuse before it
starts JAX or writes anything (BadInput, BadRunName), as verify() does.
Its checks need no jax: they run in the main environment."""
import pytest

from ckpt_verify import BadInput, BadRunName
from ckpt_verify.frontends.jax import verify_jax


def _loss(params, batch):
    raise AssertionError("never trained")


def _never(*args):
    raise AssertionError("never called")


@pytest.mark.parametrize("name", ["baseline_0", "has space", "a_rerun_1", ""])
def test_a_run_name_the_report_cannot_hold_is_refused(tmp_path, name):
    with pytest.raises(BadRunName):
        verify_jax(_never, _never, {name: _loss}, baseline=_loss, out=str(tmp_path / "r.h5"))
    assert not (tmp_path / "r.h5").exists()


def test_expect_naming_an_unknown_run_is_refused(tmp_path):
    with pytest.raises(BadInput, match="expect names run 'other'"):
        verify_jax(_never, _never, {"mine": _loss}, baseline=_loss, expect={"other": "FAIL"},
                   out=str(tmp_path / "r.h5"))


@pytest.mark.parametrize("kwargs, words", [({"steps": 0}, "steps"), ({"lr": float("nan")}, "lr"),
                                            ({"noise_runs": -1}, "noise_runs"), ({"seed": -1}, "seed")])
def test_a_number_out_of_range_is_refused(tmp_path, kwargs, words):
    with pytest.raises(BadInput, match=words):
        verify_jax(_never, _never, {"mine": _loss}, baseline=_loss, out=str(tmp_path / "r.h5"), **kwargs)


def test_a_missing_output_folder_is_refused(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        verify_jax(_never, _never, {"mine": _loss}, baseline=_loss, out=str(tmp_path / "no" / "r.h5"))
