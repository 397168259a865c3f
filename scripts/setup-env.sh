#!/usr/bin/env bash
# Builds the project's one Python environment, .venv/ at the repository root,
# from env/requirements.txt (torch from PyPI, pinned; h5py, numpy, pytest,
# ruff). The C build links this torch's libtorch and every Python part
# imports it; scripts/python runs it. Idempotent: when .venv was built from
# the same requirements it does nothing. Wheels are kept in a wheelhouse
# (CKPT_WHEELHOUSE, default ~/.cache/ckpt-verify/wheels), so a second set-up
# on the same machine downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
req=env/requirements.txt
venv=.venv
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
  echo "setup-env: downloading the pinned wheels into $wheels (torch and its CUDA libraries: several GB)"
  "$py" -m pip download -q --only-binary=:all: -d "$wheels" -r "$req"
  touch "$have"
fi

rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" -r "$req"
"$venv/bin/python" - <<'PY'
import h5py, numpy, torch
print(f"setup-env: torch {torch.__version__} (CUDA {torch.version.cuda}), h5py {h5py.__version__}, "
      f"numpy {numpy.__version__}")
PY
echo "$want" > "$stamp"
