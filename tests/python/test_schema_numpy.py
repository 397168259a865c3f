"""The schema stores numpy arrays (the JAX frontend's, whose environment has
no torch) exactly as it stores torch tensors: the same dtype names, the
same bits, and a dtype it has no type for refused naming it."""
import h5py
import numpy as np
import pytest
import torch

from ckpt_verify import BadInput
from ckpt_verify.schema import read_tensor, storable, write_tensor


def test_a_numpy_array_is_stored_with_the_bits_and_dtype_name_of_the_same_torch_tensor(tmp_path):
    a = np.array([0.1, -2.5, 1e-30], dtype=np.float32)
    with h5py.File(tmp_path / "r.h5", "w") as f:
        write_tensor(f, "from_numpy", a)
        write_tensor(f, "from_torch", torch.from_numpy(a.copy()))
        assert f["from_numpy"].attrs["dtype"] == f["from_torch"].attrs["dtype"]
        assert f["from_numpy"][()].tobytes() == f["from_torch"][()].tobytes()
        assert torch.equal(read_tensor(f["from_numpy"]), torch.from_numpy(a))


def test_a_numpy_scalar_loss_stays_a_scalar_dataspace(tmp_path):
    with h5py.File(tmp_path / "r.h5", "w") as f:
        write_tensor(f, "loss", np.array(np.float32(0.5)))
        assert f["loss"].shape == ()


def test_narrow_numpy_integers_widen_to_int64_and_bool_is_stored_as_bytes(tmp_path):
    with h5py.File(tmp_path / "r.h5", "w") as f:
        write_tensor(f, "i", np.array([1, -2], dtype=np.int32))
        write_tensor(f, "b", np.array([True, False]))
        assert f["i"].dtype == np.int64 and f["b"].attrs["dtype"] in (b"bool", "bool")


def test_a_numpy_dtype_without_a_schema_type_is_refused():
    assert not storable(np.zeros(2, dtype=np.complex64))
    with pytest.raises(BadInput, match="complex64"), h5py.File("unused.h5", "w", driver="core",
                                                               backing_store=False) as f:
        write_tensor(f, "c", np.zeros(2, dtype=np.complex64))
