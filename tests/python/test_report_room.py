"""pytest: the Python writer reserves room before each write, as the C
writer does (issue 38, item 4). A report that does not fit (a file size
limit, a full file system) or cannot be created (a read-only file system)
is ReportNotWritable, one line naming the file and the reason, never
HDF5's own error stack; no temporary is left and a previous report at the
path is kept byte for byte. Each report is written under a temporary name
of its own, so two writers into one path never open the same file.

The file size limit (RLIMIT_FSIZE, `ulimit -f`) needs no privileges: it
runs in a child process. A full and a read-only file system are small
tmpfs mounts, where this user may mount them."""
import os
import resource
import subprocess
import sys
import textwrap

import h5py
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)
from ckpt_verify import errors  # noqa: E402
from ckpt_verify.recorder import Recorder  # noqa: E402

# A model whose report needs ~4 MiB: one baseline's gradients and final
# parameters (two 512x512 weights) plus the initial parameters.
CHILD = textwrap.dedent("""
    import sys
    import torch, torch.nn.functional as F
    import ckpt_verify

    def model_fn():
        return torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512))

    def batch_fn(step):
        return torch.randn(4, 512)

    def plain(m, x):
        return F.mse_loss(m(x), x)

    try:
        ckpt_verify.verify(model_fn, batch_fn, {"mine": plain}, baseline=plain, out=sys.argv[1], noise_runs=0)
    except ckpt_verify.VerifyError as e:
        print(f"{type(e).__name__}: {e}")
        sys.exit(2)
    except BaseException as e:
        print(f"UNEXPECTED {type(e).__name__}: {e}")
        sys.exit(1)
    print("written")
""")


def verify_in_child(out, size_limit=None):
    """(exit status, output) of verify() into `out` in a child process,
    under a file size limit of `size_limit` bytes when given."""
    def limit():
        if size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size_limit, resource.RLIM_INFINITY))
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR}
    p = subprocess.run([sys.executable, "-c", CHILD, str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env, preexec_fn=limit, timeout=300)
    return p.returncode, p.stdout


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount_tmpfs(name, options) -> a directory on a new tmpfs (unmounted
    afterwards), or the test is skipped where this user cannot mount."""
    mounted = []

    def mount(name, options):
        where = tmp_path / name
        where.mkdir()
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip() or p.returncode}")
        mounted.append(where)
        return where
    yield mount
    for where in mounted:
        subprocess.run(["umount", str(where)], check=False)


def test_a_report_past_the_file_size_limit_is_report_not_writable_in_one_line(tmp_path):
    code, output = verify_in_child(tmp_path / "r.h5", size_limit=2 << 20)
    assert code == 2, output
    assert output.startswith(f"ReportNotWritable: {tmp_path / 'r.h5'}: cannot write the report: File too large"), \
        output
    assert "errno" not in output and "HDF5" not in output.split("(")[0], output


def test_a_report_past_the_file_size_limit_leaves_no_temporary_and_keeps_the_previous_report(tmp_path):
    previous = tmp_path / "r.h5"
    previous.write_bytes(b"the previous report")
    code, output = verify_in_child(previous, size_limit=2 << 20)
    assert code == 2, output
    assert sorted(os.listdir(tmp_path)) == ["r.h5"], output
    assert previous.read_bytes() == b"the previous report"


def test_a_report_on_a_full_file_system_is_report_not_writable_and_leaves_nothing(mount_tmpfs):
    full = mount_tmpfs("full", "size=1m")
    code, output = verify_in_child(full / "r.h5")
    assert code == 2, output
    assert output.startswith(f"ReportNotWritable: {full / 'r.h5'}: cannot write the report: No space left on device"), \
        output
    assert os.listdir(full) == []


def test_a_report_on_a_read_only_file_system_is_report_not_writable(mount_tmpfs):
    read_only = mount_tmpfs("ro", "ro,size=1m")
    with pytest.raises(errors.ReportNotWritable, match=r"cannot create a file in .*: Read-only file system"):
        Recorder.create(str(read_only / "r.h5"), {"case": "ro"})


def test_two_writers_into_one_path_each_write_a_temporary_of_their_own(tmp_path):
    out = str(tmp_path / "r.h5")
    first = Recorder.create(out, {"case": "first"}, {"name": "first"}, {"1/0": torch.zeros(2)})
    second = Recorder.create(out, {"case": "second"}, {"name": "second"}, {"1/0": torch.ones(2)})
    assert first.path != second.path
    for rec in (first, second):
        assert os.path.dirname(rec.path) == str(tmp_path)
        assert os.path.basename(rec.path).startswith("r.h5.") and rec.path.endswith(".tmp"), rec.path
    first.commit()
    second.commit()
    assert os.listdir(tmp_path) == ["r.h5"]
    with h5py.File(out, "r") as f:  # the last one committed
        assert f.attrs["case"] == b"second"


def test_a_report_is_an_ordinary_file_not_a_private_temporary(tmp_path):
    out = str(tmp_path / "r.h5")
    umask = os.umask(0o022)
    try:
        Recorder.create(out, {"case": "mode"}).commit()
    finally:
        os.umask(umask)
    assert os.stat(out).st_mode & 0o777 == 0o644


def test_a_failed_recorder_removes_its_temporary(tmp_path):
    out = str(tmp_path / "r.h5")
    with pytest.raises(RuntimeError, match="the training failed"):
        with Recorder.create(out, {"case": "aborted"}):
            raise RuntimeError("the training failed")
    assert os.listdir(tmp_path) == []


def test_a_writer_into_a_path_another_process_is_writing_does_not_meet_its_file_lock(tmp_path):
    out = str(tmp_path / "r.h5")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom ckpt_verify.recorder import Recorder\n"
                               "rec = Recorder.create(sys.argv[1], {'case': 'other'})\nprint('open', flush=True)\n"
                               "sys.stdin.readline()\nrec.commit()\n", out],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": PYTHON_DIR})
    try:
        assert holder.stdout.readline().strip() == "open"
        Recorder.create(out, {"case": "mine"}).commit()
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert os.listdir(tmp_path) == ["r.h5"]
