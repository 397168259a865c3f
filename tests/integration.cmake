# Integration checks: the CLI end to end, each a CTest test.
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(IT_OUT ${CMAKE_BINARY_DIR}/it)

add_test(NAME cli.help COMMAND ${EXPECT} 0 "--verify-values" "nonreentrant" -- ${CV} --help)
add_test(NAME cli.list COMMAND ${EXPECT} 0 "^bias_gelu_bs1 " "^none_bs32 " -- ${CV} --list)
add_test(NAME cli.unknown_case_suggests_names
  COMMAND ${EXPECT} 2 "unknown case 'bias_gelu_bs3'.*did you mean: bias_gelu_bs[0-9]" -- ${CV} --case bias_gelu_bs3)
add_test(NAME cli.bad_flag_is_usage_error COMMAND ${EXPECT} 2 "not a valid number" -- ${CV} --steps zero)

# GNU conventions (issue 29 item 3): options and operands in any order,
# --help on every command (exit 0), short options for the common flags, the
# same "did you mean" for --impl and --suite as for --case.
set(BS1_H5 ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5)
add_test(NAME cli.judge_takes_options_after_files
  COMMAND bash -c "rm -rf ${IT_OUT}/judge_after && ${EXPECT} 0 'all verdicts as expected' -- ${CV} judge ${BS1_H5} --out ${IT_OUT}/judge_after && test -s ${IT_OUT}/judge_after/summary.json")
add_test(NAME cli.diff_takes_options_after_files
  COMMAND ${EXPECT} 0 "\"result\": \"identical\"" -- ${CV} diff ${BS1_H5}:baseline_0 ${BS1_H5}:nonreentrant --json)
set_tests_properties(cli.judge_takes_options_after_files cli.diff_takes_options_after_files
  PROPERTIES FIXTURES_REQUIRED bs1_report)
add_test(NAME cli.every_command_answers_help
  COMMAND bash -c "for c in '' diff judge merge plot bench; do ${CV} $c --help >/dev/null 2>&1 || { echo \"ckpt-verify $c --help: exit $?\"; exit 1; }; ${CV} $c -h | grep -q '^usage: ckpt-verify' || { echo \"ckpt-verify $c -h: no usage\"; exit 1; }; done")
add_test(NAME cli.short_options_for_common_flags
  COMMAND bash -c "rm -rf ${IT_OUT}/short && ${EXPECT} 0 'all verdicts as expected' -- ${CV} --cases ${CMAKE_SOURCE_DIR}/tests/data/cases/good.ini -c tiny_bs1 -i reentrant -o ${IT_OUT}/short && test -s ${IT_OUT}/short/tiny_bs1.h5 && ${EXPECT} 0 '^tiny_bs1 ' -- ${CV} --cases ${CMAKE_SOURCE_DIR}/tests/data/cases/good.ini -l && ${EXPECT} 2 \"no case is labelled 'nosuch'\" -- ${CV} -s nosuch")
add_test(NAME cli.unknown_impl_suggests_names
  COMMAND ${EXPECT} 2 "unknown impl 'nonreentrnt' \\(did you mean: nonreentrant" -- ${CV} --case bias_gelu_bs1 --impl nonreentrnt)
add_test(NAME cli.unknown_suite_suggests_labels
  COMMAND ${EXPECT} 2 "no case is labelled 'nighty'.*did you mean: nightly" -- ${CV} --suite nighty)
add_test(NAME cli.help_ends_with_exit_codes_not_blas
  COMMAND bash -c "last=$(${CV} --help | tail -n 1); case $last in *BLAS*sgemm*) echo \"help ends with: $last\"; exit 1;; esac")
set_tests_properties(cli.judge_takes_options_after_files cli.diff_takes_options_after_files cli.every_command_answers_help
  cli.short_options_for_common_flags cli.unknown_impl_suggests_names cli.unknown_suite_suggests_labels
  cli.help_ends_with_exit_codes_not_blas PROPERTIES LABELS "cli")

# CLI edges (issue 40): --list refuses an unknown suite as a run does and
# lists only the --case it is given; an unknown long option or a mistyped
# subcommand names the near one; `diff` with one file says what is missing.
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)
set(GOOD_CASES ${CMAKE_SOURCE_DIR}/tests/data/cases/good.ini)
add_test(NAME cli.list_of_an_unknown_suite_suggests_labels
  COMMAND ${EXPECT_ERROR} 2 "no case is labelled 'nighty'.*did you mean: nightly" -- ${CV} --suite nighty --list)
add_test(NAME cli.list_with_case_lists_only_that_case
  COMMAND bash -c "out=$(${CV} --list --case none_bs32 --case bias_gelu_bs1) || exit 1; printf '%s\\n' \"$out\"; [ \"$(printf '%s\\n' \"$out\" | wc -l)\" -eq 2 ] && printf '%s\\n' \"$out\" | head -n 1 | grep -q '^none_bs32 '")
# issue 50: the total of a --list (a suite's size at a glance) on stderr,
# stdout left one line per case; --help says what --impl-lib before it does.
add_test(NAME cli.list_prints_the_selections_total
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_list_total.sh ${CV} nightly)
add_test(NAME cli.help_says_impl_lib_before_it_lists_the_plugins_impls
  COMMAND ${EXPECT} 0 "--impl-lib PATH.so .*repeatable; given$" "^ +before --help, its impls are listed below" -- ${CV} --help)
set_tests_properties(cli.list_prints_the_selections_total cli.help_says_impl_lib_before_it_lists_the_plugins_impls
  PROPERTIES LABELS "cli")
add_test(NAME cli.list_with_an_unknown_case_suggests_names
  COMMAND ${EXPECT_ERROR} 2 "unknown case 'tiny_bs3' \\(did you mean: tiny_bs1" -- ${CV} --cases ${GOOD_CASES} --list --case tiny_bs3)
add_test(NAME cli.unknown_option_suggests_the_near_one
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: unknown option '--cas' \\(did you mean: --case" -- ${CV} --cas bias_gelu_bs1)
add_test(NAME cli.unknown_subcommand_option_suggests_the_near_one
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify judge: unknown option '--ot' \\(did you mean: --out\\?\\)$" -- ${CV} judge --ot x x.h5)
add_test(NAME cli.mistyped_subcommand_suggests_the_near_one
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: unknown subcommand 'jugde' \\(did you mean: judge\\?\\)$" -- ${CV} jugde x.h5)
add_test(NAME cli.diff_with_one_file_says_a_second_is_missing
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify diff: a second file is missing" -- ${CV} diff x.h5)
# bench and merge name a bad option as the other commands do (cli_option_error).
add_test(NAME cli.bench_unknown_option_suggests_the_near_one
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify bench: unknown option '--quik' \\(did you mean: --quick\\?\\)$" -- ${CV} bench --quik)
add_test(NAME cli.bench_option_without_its_value_says_so
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify bench: option '--out' needs a value \\(see ckpt-verify bench --help\\)$" -- ${CV} bench --out)
add_test(NAME cli.merge_unknown_option_suggests_the_near_one
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify merge: unknown option '--stict' \\(did you mean: --strict\\?\\)$" -- ${CV} merge --stict out in)
set_tests_properties(cli.list_of_an_unknown_suite_suggests_labels cli.list_with_case_lists_only_that_case
  cli.list_with_an_unknown_case_suggests_names cli.unknown_option_suggests_the_near_one
  cli.unknown_subcommand_option_suggests_the_near_one cli.mistyped_subcommand_suggests_the_near_one
  cli.diff_with_one_file_says_a_second_is_missing cli.bench_unknown_option_suggests_the_near_one
  cli.bench_option_without_its_value_says_so cli.merge_unknown_option_suggests_the_near_one PROPERTIES LABELS "cli")

# The triage command of the README: both references bitwise PASS, file written.
add_test(NAME case.bias_gelu_bs1
  COMMAND ${EXPECT} 0 "reentrant +PASS +yes +0 " "nonreentrant +PASS +yes +0 " "bias_gelu_bs1.h5"
  -- ${CV} --case bias_gelu_bs1 --out ${IT_OUT}/bias_gelu_bs1)
set_tests_properties(case.bias_gelu_bs1 PROPERTIES LABELS "smoke" FIXTURES_SETUP bs1_report)

# diff sees a single one-ULP change and names its index; exit 1.
add_test(NAME diff.one_ulp_perturbation_is_reported
  COMMAND bash -c "set -e; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/perturb_one_ulp.py ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5 ${IT_OUT}/perturbed.h5 /runs/baseline_0/steps/1/grads/l0.weight 37 && ${EXPECT} 1 'steps/1/grads/l0.weight +1 of [0-9]+ differ; first at \\[1, 5\\].*max ULP 1;' 'DIFFERENT' -- ${CV} diff ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:baseline_0 ${IT_OUT}/perturbed.h5:baseline_0")
set_tests_properties(diff.one_ulp_perturbation_is_reported PROPERTIES FIXTURES_REQUIRED bs1_report)
add_test(NAME diff.identical_runs_exit_0
  COMMAND ${EXPECT} 0 "bitwise identical"
  -- ${CV} diff ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:baseline_0 ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:nonreentrant)
set_tests_properties(diff.identical_runs_exit_0 PROPERTIES FIXTURES_REQUIRED bs1_report)

# Every shipped case runs and meets its expectations.
add_test(NAME cases.nightly COMMAND ${EXPECT} 0 "all verdicts as expected" -- ${CV} --suite nightly --out ${IT_OUT}/nightly)
set_tests_properties(cases.nightly PROPERTIES LABELS "nightly")

# The atomic fused kernel is noise, never a checkpoint failure: repeated
# runs with 2 threads never FAIL (exit 0 means only PASS or NOISE).
add_test(NAME cases.atomic_is_never_fail
  COMMAND bash -c "for i in 1 2 3; do ${EXPECT} 0 'bias_gelu_atomic_bs32' -- ${CV} --case bias_gelu_atomic_bs1 --case bias_gelu_atomic_bs8 --case bias_gelu_atomic_bs32 --threads 2 --out ${IT_OUT}/atomic_$i || exit 1; done")
set_tests_properties(cases.atomic_is_never_fail PROPERTIES PROCESSORS 2)

# Every test runs with its thread count pinned (cmake/test_env.cmake); a
# case that asks for threads (case file or --threads) still gets them.
add_test(NAME env.threads_pinned_and_case_threads_honoured
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_threads.sh ${CV} ${IT_OUT}/threads ${CKPT_PYTHON} ${CKPT_TEST_THREADS})
# Unpinned, a case too small to split runs on one thread, a larger one on
# libtorch's default; idle OpenMP workers sleep unless the caller says.
add_test(NAME env.threads_fit_the_case_and_idle_workers_sleep
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_thread_policy.sh ${CV} ${IT_OUT}/thread_policy ${CKPT_PYTHON})

# diff --tolerance: a one-ULP change is reported but within 1 ULP (exit 0),
# and beyond 0 (exit 1); --json says the same as data.
add_test(NAME diff.tolerance_admits_a_difference_within_it
  COMMAND bash -c "set -e; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/perturb_one_ulp.py ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5 ${IT_OUT}/perturbed_tol.h5 /runs/baseline_0/steps/1/grads/l0.weight 37 && ${EXPECT} 0 '1 differ \\(0 beyond 1 ULP\\)' 'within the tolerance' -- ${CV} diff --tolerance 1 ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:baseline_0 ${IT_OUT}/perturbed_tol.h5:baseline_0 && ${EXPECT} 1 'DIFFERENT' -- ${CV} diff --tolerance 0.5 ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:baseline_0 ${IT_OUT}/perturbed_tol.h5:baseline_0")
add_test(NAME diff.json_reports_each_tensor
  COMMAND bash -c "set -e; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/perturb_one_ulp.py ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5 ${IT_OUT}/perturbed_json.h5 /runs/baseline_0/steps/1/grads/l0.weight 37; ${CV} diff --json ${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5:baseline_0 ${IT_OUT}/perturbed_json.h5:baseline_0 > ${IT_OUT}/diff.json || test $? -eq 1; ${CKPT_PYTHON} -c \"import json,sys; d=json.load(open('${IT_OUT}/diff.json')); t=[x for x in d['tensors'] if x['status']!='identical']; ok=d['summary']['result']=='different' and len(t)==1 and t[0]['path']=='steps/1/grads/l0.weight' and t[0]['max_ulp']==1 and t[0]['first_index']=='[1, 5]'; sys.exit(0 if ok else 'json: %s' % t)\"")
set_tests_properties(diff.tolerance_admits_a_difference_within_it diff.json_reports_each_tensor PROPERTIES
  FIXTURES_REQUIRED bs1_report)

# The case attributes of a report are typed: numbers as numbers.
add_test(NAME report.case_attributes_are_typed
  COMMAND ${CKPT_PYTHON} -c "import h5py,sys,numpy as np; a=h5py.File('${IT_OUT}/bias_gelu_bs1/bias_gelu_bs1.h5')['case'].attrs; ok=isinstance(a['layers'],np.integer) and isinstance(a['dropout'],np.floating) and isinstance(a['model'],bytes); sys.exit(0 if ok else 'types: %s' % {k: type(v).__name__ for k,v in a.items()})")
set_tests_properties(report.case_attributes_are_typed PROPERTIES FIXTURES_REQUIRED bs1_report)

# The benchmark's cases (cases/bench/) are listed and run by label.
add_test(NAME cli.list_shows_bench_cases COMMAND ${EXPECT} 0 "^bench_mlp_quick .*cases/bench/bench.ini" -- ${CV} --list)

# A failed non-reentrant check leaves PyTorch's debug log beside its one-line
# reason: forward's and recompute's ops side by side, the differing row marked,
# in the report file and under the reason on the terminal.
add_test(NAME case.failed_check_records_the_op_log
  COMMAND bash -c "set -e; ${EXPECT} 0 'autocast_not_restored_nr +FAIL' 'own check failed: .*recomputed saved tensor #0 \\(op linear\\) has dtype float32' '^ +#0 \\| linear \\| linear <- recomputed tensor differs$' -- ${CV} --case checks_dtype --out ${IT_OUT}/checks_dtype; ${CKPT_PYTHON} -c \"import h5py,sys; log=h5py.File('${IT_OUT}/checks_dtype/checks_dtype.h5')['runs/autocast_not_restored_nr'].attrs['op_log']; log=log.decode() if isinstance(log,bytes) else log; want='saved tensor | forward op | recompute op\\n#0 | linear | linear <- recomputed tensor differs\\n'; sys.exit(0 if log==want else 'op_log: %r' % log)\"")

# A run names the BLAS it computes with (--version, the report's root
# attributes, summary.json): the MKL linked into the libtorch_cpu.so the
# loader resolves, at the release torch's own build configuration reports.
# (The OpenBLAS and reference-BLAS names are unit.blas_info's.)
add_test(NAME env.blas_named_as_loaded
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_blas.sh ${CV} ${IT_OUT}/blas ${CKPT_PYTHON})

# --repeats N: N timed steps per run, the case's steps recorded and the rest
# timing-only (their gradients are not written).
add_test(NAME cli.repeats_times_steps_it_does_not_record
  COMMAND bash -c "set -e; rm -rf ${IT_OUT}/repeats; ${CV} --case bias_gelu_bs1 --impl nonreentrant --steps 1 --repeats 4 --out ${IT_OUT}/repeats >/dev/null; ${CKPT_PYTHON} -c \"import h5py,sys; f=h5py.File('${IT_OUT}/repeats/bias_gelu_bs1.h5'); t=f['runs/nonreentrant/timing'].attrs; ok=t['timed_steps']==4 and t['steps']==1 and 'step_cpu_ms' in t and list(f['runs/nonreentrant/steps'])==['1']; sys.exit(0 if ok else 'timing %s, steps %s' % (dict(t), list(f['runs/nonreentrant/steps'])))\"")

# The torch version guard: the binary run against another libtorch (the
# linked one seen through links whose version.py names another version) is
# refused with one line, exit 2, nothing written; --version names both.
add_test(NAME env.other_libtorch_is_refused_before_anything_is_written
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_torch_guard.sh ${CV} ${IT_OUT}/torch_guard)

# One attribute, one type, in every run: a time is float64 also where it is
# 0 (a baseline's recompute_ms), so h5diff compares runs instead of calling
# them "not comparable".
add_test(NAME report.run_attributes_keep_one_type_across_runs
  COMMAND bash -c "set -e; rm -rf ${IT_OUT}/attr_types; ${CV} --case bias_gelu_bs1 --out ${IT_OUT}/attr_types >/dev/null; ${CKPT_PYTHON} -c \"import h5py,sys; f=h5py.File('${IT_OUT}/attr_types/bias_gelu_bs1.h5'); seen={}; [seen.setdefault((g,k),set()).add(str(f['runs'][r][g].attrs[k].dtype)) for r in f['runs'] for g in ('memory','timing','recompute') if g in f['runs'][r] for k in f['runs'][r][g].attrs]; bad={k:v for k,v in seen.items() if len(v)>1}; sys.exit('attributes with more than one type across runs: %s' % bad if bad else 0)\"")
