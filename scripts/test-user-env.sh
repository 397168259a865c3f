#!/usr/bin/env bash
# test-user-env.sh [WORK_DIR]: ckpt_verify the way a user adds it to their
# own environment. A venv of its own whose torch is not the project's pinned
# one (torch 2.9.0, the XLA frontend's, installed from the wheelhouse into
# .venv-xla by scripts/setup-env.sh and seen here through a .pth file, so no
# second copy of its CUDA libraries is installed), plus transformers for the
# Hugging Face specifications; then the README's one command,
#     pip install <checkout>
# and the user-facing Python specifications run against the installed
# package alone: copied out of the tree (their sys.path inserts of the
# tree's python/ point at nothing), with no build/, no CKPT_VERIFY, no
# CKPT_ATEN_LIB and no PYTHONPATH, memory measured by the counting
# allocator built against torch 2.9.0 at first use. Exit 77 (skipped) when
# .venv-xla is missing (CKPT_NO_XLA=1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/build/user-env}
wheels=${CKPT_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/ckpt-verify/wheels}
if [ ! -x "$root/.venv-xla/bin/python" ]; then
  echo "skipped: .venv-xla (torch 2.9.0) is not set up (scripts/setup-env.sh env/xla-requirements.txt .venv-xla)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/t/tests/python" "$work/t/tests/distributed" "$work/t/examples"
venv=$work/venv
python3 -m venv "$venv"
site() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
site "$root/.venv-xla/bin/python" > "$(site "$venv/bin/python")/ckpt-verify-user-torch.pth"
"$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" transformers==5.24.0
start=$(date +%s)
"$venv/bin/python" -m pip install -q "$root"
echo "user-env: pip install <checkout> took $(( $(date +%s) - start )) s"
"$venv/bin/python" - <<'PY'
import torch, ckpt_verify, ckpt_verify.judge as j
print(f"user-env: torch {torch.__version__}, ckpt_verify from {ckpt_verify.__file__}, judge {j.find_judge()}")
assert "/venv/" in ckpt_verify.__file__ and j.find_judge().startswith(ckpt_verify.__path__[0]), "not the installed package"
PY
"$venv/bin/ckpt-verify" --version
# The user-facing specifications, outside the tree.
cp "$root/python/examples/quickstart.py" "$work/t/examples/"
cp "$root"/tests/python/test_user_memory.py "$root"/tests/python/test_default_baseline.py "$work/t/tests/python/"
cp "$root"/tests/distributed/*.py "$work/t/tests/distributed/"
cd "$work/t"
run() { env -u PYTHONPATH -u CKPT_VERIFY -u CKPT_ATEN_LIB CKPT_VERIFY_CACHE="$work/cache" "$@"; }
(cd examples && run "$venv/bin/python" quickstart.py)
run "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python/test_user_memory.py tests/python/test_default_baseline.py
run "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/distributed/test_ddp.py tests/distributed/test_memory.py
