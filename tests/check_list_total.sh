#!/usr/bin/env bash
# check_list_total.sh CKPT_VERIFY SUITE: `ckpt-verify --suite SUITE --list`
# prints one line per case on stdout (scripts count them) and, on stderr,
# the selection's total: its cases and their impls summed, which must be
# what the lines themselves add up to.
set -u
cv=$1 suite=$2
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
out=$("$cv" --suite "$suite" --list 2>"$err") || { cat "$err"; exit 1; }
cases=$(printf '%s\n' "$out" | wc -l)
records=$(printf '%s\n' "$out" | awk '{ for (i = 1; i < NF; i++) if ($i == "impls:") n += $(i + 1) } END { print n + 0 }')
want="total: $cases cases, $records case x impl records ($suite)"
printf 'stdout: %s lines; stderr: %s\n' "$cases" "$(cat "$err")"
if ! grep -qxF -- "$want" "$err"; then
  echo "check_list_total: stderr lacks the line '$want'" >&2
  exit 1
fi
if grep -q '^total:' <<<"$out"; then
  echo "check_list_total: the total is on stdout, among the cases" >&2
  exit 1
fi
