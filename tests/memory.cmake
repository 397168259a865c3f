# Memory and time: the benchmark (label bench) and the plots.
set(MEM_CV $<TARGET_FILE:ckpt-verify>)
set(MEM_EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(MEM_OUT ${CMAKE_BINARY_DIR}/it/memory)

# The benchmark, quick by default (a few seconds: CI); CKPT_BENCH_FULL=1 in
# the environment runs the full one (minutes), where the time target counts
# too. Deterministic targets hold in both: bytes held at the end of forward
# match the prediction and the activation peak grows like sqrt(L).
add_test(NAME bench.memory_and_time
  COMMAND bash -c "mode=--quick; [ -n \"\${CKPT_BENCH_FULL:-}\" ] && mode=; ${MEM_EXPECT} 0 'within 5% of the prediction: worst \\|error\\| [0-9.]+% -> met' 'activation peak at segments = sqrt\\(L\\) grows like L\\^k, 0.4 <= k <= 0.6 -> met' 'attention_core holds < 50% of the baseline.s bytes .* -> met' -- ${MEM_CV} bench $mode --out ${MEM_OUT}/bench")
# Its cases run with one thread (`threads = 1` in cases/bench/memory.ini).
set_tests_properties(bench.memory_and_time PROPERTIES LABELS "bench" TIMEOUT 3600 PROCESSORS 1)

# The memory targets fire: a planted bug that ignores the selective policy
# (MEMFAIL, as its case expects) holds more than the policy's prediction and
# more than half of the baseline past the attention_core crossing.
add_test(NAME bench.memory_targets_fire_on_policy_ignored
  COMMAND ${MEM_EXPECT} 1 "within 5% of the prediction: worst \\|error\\| [0-9.]+% -> MISSED"
    "attention_core holds < 50% of the baseline.s bytes .* -> MISSED" "policy_ignored +MEMFAIL +yes"
    "selective +PASS +yes"
  -- ${MEM_CV} bench --quick --cases ${CMAKE_SOURCE_DIR}/tests/data/cases/bench_policy_ignored.ini --out ${MEM_OUT}/bench_policy_ignored)
# --device: a device this build or machine lacks is one line, exit 2, before
# any case runs (a CPU build refuses every cuda:N; cuda:99 fails on any).
add_test(NAME bench.device_missing_is_usage_error
  COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_error.sh 2 "^ckpt-verify: bench --device: device cuda:99 requested but"
  -- ${MEM_CV} bench --quick --device cuda:99 --out ${MEM_OUT}/bench_cuda99)
# cuda:0 where there is none (a CPU build, or a CUDA build on a machine
# without a device): a usage error. On a GPU machine there is one.
add_test(NAME bench.device_cuda_without_a_device_is_usage_error
  COMMAND bash -c "if nvidia-smi -L >/dev/null 2>&1; then echo 'skipped: a CUDA device is present'; exit 77; fi; ${CMAKE_SOURCE_DIR}/tests/expect_error.sh 2 '^ckpt-verify: bench --device: device cuda:0 requested but (.*no CUDA|0 CUDA device)' -- ${MEM_CV} bench --device cuda:0 --out ${MEM_OUT}/bench_cuda0")
set_tests_properties(bench.device_cuda_without_a_device_is_usage_error PROPERTIES SKIP_RETURN_CODE 77)

# The GPU benchmark is one command on a GPU machine (scripts/gpu-build.sh);
# here its dry run shows the steps it would run, and the torch comparison
# refuses a torch without CUDA in one line, exit 2.
add_test(NAME bench.gpu_build_dry_run_lists_the_gpu_bench_steps
  COMMAND ${MEM_EXPECT} 0 "bench_gpu: .*ckpt-verify bench --device cuda:0" "bench_vs_torch_gpu: .*bench_vs_torch_gpu.py --bench-dir"
    "crosscheck_cuda: .*crosscheck.sh .*gpu_fp32_none_bs1 .*gpu_gpt_none" "dry run: the steps above were printed, none ran"
  -- bash ${CMAKE_SOURCE_DIR}/scripts/gpu-build.sh --dry-run)
if(NOT CKPT_CUDA_MODE STREQUAL "full")
  add_test(NAME bench.vs_torch_gpu_needs_cuda
    COMMAND bash -c "d=${MEM_OUT}/vs_torch_gpu && mkdir -p $d && echo '{\"records\": []}' > $d/summary.json && ${CMAKE_SOURCE_DIR}/tests/expect_error.sh 2 'bench_vs_torch_gpu: torch .* sees no CUDA device' -- ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/bench_vs_torch_gpu.py --bench-dir $d --ckpt-verify ${MEM_CV}")
endif()

# A small real run with a batch sweep, a segments sweep and two depths,
# then its plots: every one drawn, as PNG and SVG (skipped without gnuplot).
# Its steps take microseconds: timed over 5 (--repeats), so that a loaded
# machine does not leave every overhead unstable and the overhead plot empty.
add_test(NAME plot.small_run_setup
  COMMAND ${MEM_EXPECT} 0 "all verdicts as expected"
  -- ${MEM_CV} --case none_bs1 --case none_bs2 --case none_bs4 --case mlp_seg1 --case mlp_seg2 --case mlp_segevery
     --repeats 5 --out ${MEM_OUT}/plot_run)
set_tests_properties(plot.small_run_setup PROPERTIES FIXTURES_SETUP plot_run)
ckpt_add_test_needing(plot.small_run TOOLS gnuplot
  COMMAND bash -c "rm -rf ${MEM_OUT}/plot_run/plots && ${MEM_EXPECT} 0 '7 plot\\(s\\) drawn, 1 skipped' -- ${MEM_CV} plot ${MEM_OUT}/plot_run && ${CMAKE_SOURCE_DIR}/tests/check_plots.sh ${MEM_OUT}/plot_run/plots determinism peak_vs_batch saved_vs_segments saved_vs_depth memory_vs_depth overhead held_per_case")
set_tests_properties(plot.small_run PROPERTIES FIXTURES_REQUIRED plot_run)

# Case names from anyone's summary (quotes, a line break) are drawn, not
# a gnuplot error with an empty PNG left behind.
ckpt_add_test_needing(plot.crafted_case_names_are_drawn TOOLS gnuplot
  COMMAND bash -c "rm -rf ${MEM_OUT}/crafted && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/crafted_names.py ${MEM_OUT}/plot_run ${MEM_OUT}/crafted && ${MEM_EXPECT} 0 'plot\\(s\\) drawn' -- ${MEM_CV} plot ${MEM_OUT}/crafted && ! find ${MEM_OUT}/crafted/plots -name '*.png' -empty | grep -q . && ${CMAKE_SOURCE_DIR}/tests/check_plots.sh ${MEM_OUT}/crafted/plots determinism")
# Plots hide no data and read at their natural size (tests/check_plot_pages.py):
# the small run copied to a nightly's 114 cases is paged, each image at most
# 2000 pixels, every overhead drawn (unstable ones marked, whiskers to the
# slowest baseline) and every peak cut beside its held cut; one case alone
# has nothing running off its images (the legend, the titles).
ckpt_add_test_needing(plot.nightly_size_is_paged_and_hides_nothing TOOLS gnuplot
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py ${MEM_CV} nightly ${MEM_OUT}/plot_run ${MEM_OUT}/nightly_size)
ckpt_add_test_needing(plot.one_case_nothing_clipped TOOLS gnuplot
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py ${MEM_CV} one ${MEM_OUT}/plot_run ${MEM_OUT}/one_case)
# A 150x outlier does not flatten the other overheads: a log axis.
ckpt_add_test_needing(plot.overhead_outlier_gets_a_log_axis TOOLS gnuplot
  COMMAND bash -c "rm -rf ${MEM_OUT}/outlier && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py ${MEM_CV} outlier ${MEM_OUT}/plot_run ${MEM_OUT}/outlier")
# A determinism page of impls some cases never ran has no empty rows.
ckpt_add_test_needing(plot.determinism_pages_have_no_empty_rows TOOLS gnuplot
  COMMAND bash -c "rm -rf ${MEM_OUT}/rows && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py ${MEM_CV} rows ${MEM_OUT}/plot_run ${MEM_OUT}/rows")
# Long case names end above the footer under the per-case bar plots.
ckpt_add_test_needing(plot.long_case_names_clear_the_footer TOOLS gnuplot
  COMMAND bash -c "rm -rf ${MEM_OUT}/footer && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py ${MEM_CV} footer ${MEM_OUT}/plot_run ${MEM_OUT}/footer")
set_tests_properties(plot.nightly_size_is_paged_and_hides_nothing plot.one_case_nothing_clipped
  plot.overhead_outlier_gets_a_log_axis plot.determinism_pages_have_no_empty_rows
  plot.long_case_names_clear_the_footer PROPERTIES
  FIXTURES_REQUIRED plot_run LABELS "plot")
# A gnuplot that fails leaves no picture (empty or partial) behind.
add_test(NAME plot.failed_gnuplot_leaves_no_png
  COMMAND bash -c "d=${MEM_OUT}/failed_gnuplot && rm -rf $d && mkdir -p $d && cp ${MEM_OUT}/plot_run/summary.json $d/ && env CKPT_GNUPLOT=${CMAKE_SOURCE_DIR}/tests/fake_gnuplot_fails.sh ${MEM_CV} plot $d; code=$?; test $code -ne 0 || { echo 'exit 0 with a failing gnuplot'; exit 1; }; left=$(find $d/plots -name '*.png' -o -name '*.svg'); test -z \"$left\" || { echo \"left behind: $left\"; exit 1; }")
set_tests_properties(plot.crafted_case_names_are_drawn plot.failed_gnuplot_leaves_no_png PROPERTIES FIXTURES_REQUIRED plot_run
  LABELS "plot")

# No gnuplot: one line on stderr, exit 2, before the run directory is read.
add_test(NAME plot.gnuplot_missing_is_usage_error
  COMMAND bash -c "out=$(env PATH=/nonexistent ${MEM_CV} plot ${MEM_OUT}/no_such_run 2>&1); code=$?; printf '%s\\n' \"$out\"; [ $code -eq 2 ] && [ $(printf '%s\\n' \"$out\" | wc -l) -eq 1 ] && grep -q 'gnuplot not found on PATH' <<<\"$out\"")

# Bytes held at the end of forward match the model's prediction in every run
# that did the case's work, the first baseline included: one-time
# allocations (library workspaces) are taken by the warm-up, not the runs.
add_test(NAME memory.end_forward_matches_prediction
  COMMAND bash -c "rm -rf ${MEM_OUT}/predictions && ${MEM_CV} --suite smoke --out ${MEM_OUT}/predictions >/dev/null && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_predictions.py ${MEM_OUT}/predictions 0.05")

# The heatmap's colour says "as expected or not" (red exactly for the
# unexpected verdicts) and its cells show distances at the tensor's scale.
ckpt_add_test_needing(plot.heatmap_colour_is_expectation TOOLS gnuplot
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_heatmap.py ${MEM_CV} ${MEM_OUT}/heatmap)
