#!/usr/bin/env bash
# Builds a pinned Python environment at the repository root:
#   scripts/setup-env.sh                          .venv/ from env/requirements.txt
#   scripts/setup-env.sh env/xla-requirements.txt .venv-xla
# The first is the project's torch (from PyPI, pinned; h5py, numpy, pytest,
# ruff): the C build links its libtorch and every Python part imports it;
# scripts/python runs it. The second holds torch 2.9.0 + torch-xla 2.9.0 for
# the XLA frontend only (scripts/python-xla; docs/stack.md says why).
# Idempotent: when the venv was built from the same requirements it does
# nothing. Wheels are kept in a wheelhouse
# (CKPT_WHEELHOUSE, default ~/.cache/ckpt-verify/wheels), so a second set-up
# on the same machine downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
req=${1:-env/requirements.txt}
venv=${2:-.venv}
wheels=${CKPT_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/ckpt-verify/wheels}
stamp=$venv/.ckpt-verify-requirements
want=$(sha256sum "$req" | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi

# The interpreter: python3 on PATH, 3.10 or newer, with venv and ensurepip
# (Debian splits them into python3-venv).
py=${CKPT_BASE_PYTHON:-python3}
if ! "$py" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "setup-env: $py has no venv/ensurepip; installing python3-venv"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3 python3-venv
  py=/usr/bin/python3
fi

mkdir -p "$wheels"
# The wheelhouse holds every wheel the requirements resolve to for this
# interpreter; the list of them is written only after a complete download.
tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
have=$wheels/.complete-$tag-$want
if [ ! -e "$have" ]; then
  echo "setup-env: downloading the wheels of $req into $wheels (torch and its CUDA libraries: several GB)"
  "$py" -m pip download -q --only-binary=:all: -d "$wheels" -r "$req"
  touch "$have"
fi

rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" -r "$req"
"$venv/bin/python" - <<'PY'
import importlib.util, h5py, numpy, torch
xla = ""
if importlib.util.find_spec("torch_xla") is not None:
    import torch_xla
    xla = f", torch_xla {torch_xla.__version__}"
print(f"setup-env: torch {torch.__version__} (CUDA {torch.version.cuda}){xla}, h5py {h5py.__version__}, "
      f"numpy {numpy.__version__}")
PY
echo "$want" > "$stamp"
