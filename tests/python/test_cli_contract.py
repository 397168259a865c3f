"""pytest: `python -m ckpt_verify` keeps the CLI's contract (issue 38,
item 3): exit 2 for bad input (a framework this Python lacks, named with
the script that has it; a batch_fn that raises; an --out that cannot be
written, leaving no temporary), 3 for an internal or judge failure, and a
script's own sys.exit(N) passed on only after saying so. Each failure is
one line on stderr, no traceback; --verbose adds the traceback."""
import importlib.util
import os
import resource
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
EXAMPLE = os.path.join(HERE, "..", "..", "python", "examples", "hook_checkpoint.py")
sys.path.insert(0, PYTHON_DIR)
import ckpt_verify.__main__ as cli  # noqa: E402

TINY = """
import torch
import torch.nn.functional as F

def model_fn():
    return torch.nn.Linear(4, 4)

def batch_fn(step):
    return torch.randn(2, 4)

def plain(m, x):
    return F.mse_loss(m(x), x)

runs = {"mine": plain}
baseline = plain
"""


def script(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run_cli(*args, size_limit=None):
    """(exit status, stdout, stderr) of `python -m ckpt_verify ARGS`."""
    def limit():
        if size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size_limit, resource.RLIM_INFINITY))
    p = subprocess.run([sys.executable, "-m", "ckpt_verify", *args], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": PYTHON_DIR}, preexec_fn=limit, timeout=300)
    return p.returncode, p.stdout, p.stderr


def said(stderr):
    """The CLI's own lines on stderr (torch's warnings aside)."""
    return [line for line in stderr.splitlines() if line.strip() and "Warning" not in line]


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is not None, reason="this Python has torch_xla")
def test_device_xla_without_torch_xla_is_bad_input_naming_the_xla_python():
    code, _, err = run_cli("--device", "xla", EXAMPLE)
    assert code == 2, err
    lines = said(err)
    assert len(lines) == 1 and "device='xla' needs torch_xla: run it with scripts/python-xla" in lines[0], err
    assert "Traceback" not in err


@pytest.mark.skipif(importlib.util.find_spec("jax") is not None, reason="this Python has jax")
def test_a_script_that_imports_jax_without_jax_is_bad_input_naming_the_jax_python(tmp_path):
    code, _, err = run_cli(script(tmp_path, "import jax\n"))
    assert code == 2, err
    assert "needs jax, which this Python does not have: run it with scripts/python-jax" in err
    assert len(said(err)) == 1 and "Traceback" not in err, err


def test_a_batch_fn_that_raises_is_bad_input_in_one_line_and_writes_nothing(tmp_path):
    path = script(tmp_path, TINY + "\ndef batch_fn(step):\n    raise ValueError('no data here')\n")
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run_cli("--out", str(out / "r.h5"), path)
    assert code == 2, err
    assert said(err) == [f"{path}: bad input (BadInput): batch_fn(1) raised ValueError: no data here; "
                             f"nothing written"], err
    assert os.listdir(out) == []


def test_verbose_adds_the_traceback_of_the_code_that_raised(tmp_path):
    path = script(tmp_path, TINY + "\ndef batch_fn(step):\n    raise ValueError('no data here')\n")
    code, _, err = run_cli("--verbose", "--out", str(tmp_path / "r.h5"), path)
    assert code == 2, err
    assert "Traceback" in err and f'File "{path}", line' in err and "ValueError: no data here" in err


def test_an_out_past_the_file_size_limit_is_bad_input_leaving_no_temporary(tmp_path):
    path = script(tmp_path, TINY.replace("(4, 4)", "(512, 512)").replace("(2, 4)", "(2, 512)"))
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = run_cli("--out", str(out / "r.h5"), path, size_limit=1 << 20)
    assert code == 2, err
    lines = said(err)
    assert len(lines) == 1 and "cannot write the report: File too large" in lines[0], err
    assert "Traceback" not in err
    assert os.listdir(out) == []


def test_a_scripts_own_sys_exit_while_loading_is_passed_on_after_saying_so(tmp_path):
    code, _, err = run_cli(script(tmp_path, "import sys\nsys.exit(3)\n"))
    assert code == 3
    assert "the script called sys.exit(3) while loading; passing its status 3 on" in err, err


def test_an_internal_error_exits_3_in_one_line(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise KeyError("a bug of ckpt_verify")
    monkeypatch.setattr(sys.modules["ckpt_verify.verify"], "verify", broken)
    path = script(tmp_path, TINY)
    assert cli.main(["--out", str(tmp_path / "r.h5"), path]) == 3
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{path}: internal error: KeyError: 'a bug of ckpt_verify'; nothing written (run "
                                f"with --verbose for the traceback)"], err


def test_an_out_in_directories_that_do_not_exist_creates_them_as_the_binary_does(tmp_path):
    # `ckpt-verify --out DIR` makes every missing directory of DIR; so does
    # `python -m ckpt_verify --out DIR/x.h5` for the directories above x.h5.
    out = tmp_path / "reports" / "nightly" / "x.h5"
    plain_control = TINY.replace('runs = {"mine": plain}',
                                 'import ckpt_verify\nruns = {"mine": ckpt_verify.Run(step=plain, memory=None)}')
    code, stdout, err = run_cli("--out", str(out), script(tmp_path, plain_control))
    assert code == 0, stdout + err
    assert out.is_file() and f"report: {out}" in stdout


def test_an_out_below_a_file_is_bad_input_naming_it_and_creates_nothing(tmp_path):
    (tmp_path / "taken").write_text("a file, not a directory")
    out = tmp_path / "taken" / "deeper" / "x.h5"
    code, _, err = run_cli("--out", str(out), script(tmp_path, TINY))
    assert code == 2, err
    assert said(err) == [f"{tmp_path / 'script.py'}: bad input: --out {out}: {tmp_path / 'taken'}: exists and is "
                         f"not a directory; nothing written"], err


def test_directories_made_for_an_out_are_removed_when_nothing_is_written(tmp_path):
    path = script(tmp_path, TINY + "\ndef batch_fn(step):\n    raise ValueError('no data here')\n")
    code, _, err = run_cli("--out", str(tmp_path / "new" / "deeper" / "r.h5"), path)
    assert code == 2, err
    assert not (tmp_path / "new").exists()
