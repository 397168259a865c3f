#!/usr/bin/env bash
# check_plots.sh DIR NAME...: passes when DIR/NAME.png is a non-empty PNG and
# DIR/NAME.svg a non-empty SVG for every NAME.
set -u
dir=$1; shift
status=0
for name in "$@"; do
  png=$dir/$name.png svg=$dir/$name.svg
  if [ ! -s "$png" ] || [ "$(head -c 4 "$png" | od -An -tx1 | tr -d ' \n')" != "89504e47" ]; then
    echo "check_plots: $png is missing, empty or not a PNG" >&2; status=1
  fi
  if [ ! -s "$svg" ] || ! head -c 4096 "$svg" | grep -q "<svg"; then
    echo "check_plots: $svg is missing, empty or not an SVG" >&2; status=1
  fi
done
[ $status -eq 0 ] && echo "check_plots: $# plot(s) present as PNG and SVG in $dir"
exit $status
