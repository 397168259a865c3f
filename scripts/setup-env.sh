#!/usr/bin/env bash
# Builds a pinned Python environment at the repository root:
#   scripts/setup-env.sh                          .venv/ from env/requirements.txt
#   scripts/setup-env.sh env/xla-requirements.txt .venv-xla
#   scripts/setup-env.sh env/jax-requirements.txt .venv-jax
# The first is the project's torch (from PyPI, pinned; h5py, numpy, pytest,
# ruff; the realworld suite's frameworks): the C build links its libtorch
# and every Python part imports it; scripts/python runs it. The second holds
# torch 2.9.0 + torch-xla 2.9.0 for the XLA frontend only
# (scripts/python-xla; docs/stack.md says why); the third jax and jaxlib
# (CPU) for the JAX frontend only (scripts/python-jax).
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
# A requirement marked "# sdist" (PyPI has no wheel of it) is downloaded as
# a source archive and built into a wheel here, once, so that installing
# stays offline and wheel-only.
tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
have=$wheels/.complete-$tag-$want
sdists=$(sed -n 's/^\([A-Za-z0-9_.-]*\)==\([^ #]*\) *# *sdist.*/\1==\2/p' "$req")
if [ ! -e "$have" ]; then
  echo "setup-env: downloading the wheels of $req into $wheels (torch and its CUDA libraries: several GB)"
  no_binary=$(echo "$sdists" | sed 's/==.*//' | paste -sd, -)
  DS_BUILD_OPS=0 "$py" -m pip download -q --only-binary=:all: ${no_binary:+--no-binary="$no_binary"} \
    -d "$wheels" -r "$req"
  for pin in $sdists; do
    name=${pin%%==*}; version=${pin#*==}
    archive=$(ls "$wheels"/"$name"-"$version".tar.gz "$wheels"/"${name//-/_}"-"$version".tar.gz 2>/dev/null | head -n 1)
    [ -n "$archive" ] || { echo "setup-env: no source archive of $pin in $wheels" >&2; exit 1; }
    echo "setup-env: building a wheel of $pin"
    DS_BUILD_OPS=0 "$py" -m pip wheel -q --no-deps -w "$wheels" "$archive"
  done
  touch "$have"
fi

rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --only-binary=:all: --find-links "$wheels" -r "$req"
"$venv/bin/python" - <<'PY'
import importlib.util, h5py, numpy
have = lambda name: importlib.util.find_spec(name) is not None
parts = []
if have("torch"):
    import torch
    parts.append(f"torch {torch.__version__} (CUDA {torch.version.cuda})")
if have("torch_xla"):
    import torch_xla
    parts.append(f"torch_xla {torch_xla.__version__}")
if have("jax"):
    import jax, jaxlib
    parts.append(f"jax {jax.__version__}, jaxlib {jaxlib.__version__} ({jax.default_backend()})")
print(f"setup-env: {', '.join(parts)}, h5py {h5py.__version__}, numpy {numpy.__version__}")
PY
echo "$want" > "$stamp"
