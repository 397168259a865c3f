#!/usr/bin/env bash
# mutants.sh [--work DIR] [--cases "ARGS"] [PATCH...]: the mutation suite.
# Each tests/mutants/NN-<bug class>.patch is a realistic mistake in impls/,
# harness/autograd/ or the judge's detectors (harness/judge/). The tree
# itself is never touched: its tracked and
# untracked (not ignored) files are copied into DIR/src (default
# build/mutants; only changed files are rewritten, so builds stay
# incremental), each patch is applied there, ckpt-verify is rebuilt in
# DIR/build (CPU only), the suite runs (default: the smoke suite; a patch
# with a `# cases:` line runs those cases instead, one with a `# test: RE
# TARGET` line the CTest tests RE after building TARGET), and the patch is taken out
# again — also on Ctrl-C. A mutant is killed when the suite does not end
# with every verdict as expected (exit != 0). A patch with a `# cpu: no`
# line cannot show on the CPU: it is listed with the GPU case its line
# names and left out of the score. Prints each mutant's fate, the score
# and the survivors; exits 1 below 95%, 2 when the unmutated suite itself
# fails or a patch does not apply or build.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/build/mutants
suite=(--suite smoke)
patches=()
while [ $# -gt 0 ]; do
  case $1 in
    --work) work=$2; shift 2 ;;
    --cases) read -r -a suite <<<"$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) patches+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
  esac
done
[ ${#patches[@]} -gt 0 ] || patches=("$root"/tests/mutants/*.patch)
src=$work/src build=$work/build out=$work/out
mkdir -p "$src" "$out"

# The copy: what git tracks or would track, rewritten only where it differs.
# (A restored file gets a new mtime, so a build never keeps a mutant's object.)
list_tree() {
  if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$root" && git ls-files -co --exclude-standard -z)
  else # a checkout without git: everything but build outputs
    (cd "$root" && find . -type f -not -path './build*' -not -path './reports/*' -not -path './.venv/*' -not -path './.git' -not -path './.git/*' -printf '%P\0')
  fi
}
list_tree | while IFS= read -r -d '' f; do
  [ -f "$root/$f" ] || continue
  if ! cmp -s "$root/$f" "$src/$f"; then
    mkdir -p "$(dirname "$src/$f")" && cp "$root/$f" "$src/$f" || exit 2
  fi
done || exit 2
ln -sfn "$root/.venv" "$src/.venv"

# git apply as a plain patch tool inside the copy: with the copy under the
# tree (the default), a git apply that found the tree's repository would
# skip every path outside the copy's directory — and say nothing.
patch_copy() { (cd "$src" && GIT_CEILING_DIRECTORIES=$(dirname "$src") git apply "$@"); }
applied=""
restore() {
  if [ -n "$applied" ]; then
    patch_copy -R "$applied" || echo "mutants: could not take $applied out of $src (the next run recopies it)" >&2
    applied=""
  fi
}
trap 'restore; exit 130' INT TERM
trap restore EXIT

build_cv() {
  cmake --build "$build" --target ckpt-verify -j "${MUTANTS_JOBS:-$(nproc)}" >"$out/build.log" 2>&1
}
if [ ! -f "$build/build.ninja" ]; then
  # No optimisation and no debug information: the copy is rebuilt for every
  # mutant, and the suites it runs spend their time in libtorch, not in it.
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCKPT_CUDA=OFF \
    -DCKPT_PYTHON="$root/scripts/python" >"$out/configure.log" 2>&1 || { cat "$out/configure.log" >&2; exit 2; }
fi
cv=$build/ckpt-verify
started=$(date +%s)
if ! build_cv; then tail -20 "$out/build.log" >&2; echo "mutants: the unmutated tree does not build" >&2; exit 2; fi
if ! "$cv" "${suite[@]}" --out "$out/reference" >"$out/reference.log" 2>&1; then
  tail -5 "$out/reference.log" >&2
  echo "mutants: the unmutated suite (${suite[*]}) does not pass; nothing to measure" >&2
  exit 2
fi

killed=0 counted=0 survivors=() gpu_only=()
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  if grep -q '^# cpu: no' "$patch"; then
    gpu_only+=("$name ($(sed -n 's/^# cpu: no[ —-]*//p' "$patch" | head -1))")
    printf '  %-44s not on the CPU\n' "$name"
    continue
  fi
  extra=()
  read -r -a extra <<<"$(sed -n 's/^# cases: *//p' "$patch" | head -1 | sed 's/\([^ ,]\+\)/--case \1/g; s/,//g')"
  if ! patch_copy "$patch"; then
    echo "mutants: $name does not apply" >&2; exit 2
  fi
  applied=$patch
  for f in $(patch_copy --numstat "$patch" 2>/dev/null | cut -f3); do
    if cmp -s "$root/$f" "$src/$f"; then echo "mutants: $name left $f as it was" >&2; exit 2; fi
  done
  if ! build_cv; then
    tail -20 "$out/build.log" >&2; echo "mutants: $name does not build" >&2; exit 2
  fi
  run=("${suite[@]}")
  [ ${#extra[@]} -gt 0 ] && run=("${extra[@]}")
  read -r test_re test_target <<<"$(sed -n 's/^# test: *//p' "$patch" | head -1)"
  if [ -n "${test_re:-}" ]; then
    # A detector whose mistake only shows beside a planted bug or in a unit
    # test: that CTest test, built and run in the copy.
    if [ -n "${test_target:-}" ] && ! cmake --build "$build" --target "$test_target" -j "${MUTANTS_JOBS:-$(nproc)}" \
      >>"$out/build.log" 2>&1; then
      tail -20 "$out/build.log" >&2; echo "mutants: $name: $test_target does not build" >&2; exit 2
    fi
    ctest --test-dir "$build" -R "$test_re" --output-on-failure >"$out/$name.log" 2>&1
    code=$?
    grep -q "No tests were found" "$out/$name.log" && { echo "mutants: $name: no test $test_re" >&2; exit 2; }
  else
    "$cv" "${run[@]}" --out "$out/$name" >"$out/$name.log" 2>&1
    code=$?
  fi
  restore
  counted=$((counted + 1))
  if [ $code -ne 0 ]; then
    killed=$((killed + 1))
    why=$(grep -m1 -E ' NO |^ckpt-verify: |expect.sh: |\[  FAILED  \]|Failure' "$out/$name.log" | sed 's/  */ /g' | cut -c1-90)
    printf '  %-44s killed (exit %d: %s)\n' "$name" "$code" "$why"
  else
    survivors+=("$name")
    printf '  %-44s SURVIVED\n' "$name"
  fi
done
build_cv || exit 2 # leave the copy's binary unmutated
score=$((counted ? 100 * killed / counted : 0))
echo "mutants: $killed of $counted killed on the CPU ($score%), ${#gpu_only[@]} not on the CPU; $(( $(date +%s) - started )) s"
for g in "${gpu_only[@]}"; do echo "  not on the CPU: $g"; done
for s in "${survivors[@]}"; do echo "  survivor: $s"; done
[ "$counted" -gt 0 ] && [ $((100 * killed)) -ge $((95 * counted)) ] || exit 1
