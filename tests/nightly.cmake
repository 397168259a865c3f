# Nightly regression mode (issue 7): progress lines, junit.xml, --compare-to,
# --shard and merge, scripts/nightly.sh, and one CTest test per case.
set(NT_CV $<TARGET_FILE:ckpt-verify>)
set(NT_EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(NT_TOOL "${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/summary_tool.py")
set(NT_JUNIT "${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_junit.py")
set(NT_CASES ${CMAKE_SOURCE_DIR}/tests/data/nightly_cases.ini)
set(NT_OUT ${CMAKE_BINARY_DIR}/it/nightly_mode)
# Two deterministic cases (a PASS pair and an expected FAIL pair): fewer
# than the five an overhead judgement needs, so a rerun compares equal.
set(NT_PAIR --case bias_gelu_bs1 --case mlp_no_preserve_rng)
set(NT_PAIR_SH "--case bias_gelu_bs1 --case mlp_no_preserve_rng") # the same, inside bash -c

# Off a terminal with --progress, one line per finished case on stderr;
# the tables stay.
add_test(NAME nightly.progress_line_per_case
  COMMAND ${NT_EXPECT} 0 "^\\[1/2\\] bias_gelu_bs1: reentrant PASS, nonreentrant PASS \\([0-9.]+ s\\)$"
    "^\\[2/2\\] mlp_no_preserve_rng: reentrant FAIL, nonreentrant FAIL \\([0-9.]+ s\\)$" "^  impl +verdict"
  -- ${NT_CV} ${NT_PAIR} --progress --out ${NT_OUT}/progress)
# Off a terminal without it, stderr stays empty.
add_test(NAME nightly.quiet_off_a_terminal
  COMMAND bash -c "err=$(${NT_CV} ${NT_PAIR_SH} --out ${NT_OUT}/quiet 2>&1 >/dev/null) || exit 1; [ -z \"$err\" ] || { echo \"stderr not empty: $err\"; exit 1; }")

# junit.xml of a real run, read back with xml.etree: 4 testcases, the
# unexpected PASS and the unexpected FAIL are the 2 failures; exit 1.
add_test(NAME nightly.junit_from_run
  COMMAND bash -c "${NT_CV} --cases ${NT_CASES} --suite nightly_it --out ${NT_OUT}/junit_run >/dev/null 2>&1; rc=$?; [ $rc -eq 1 ] || { echo \"exit $rc, wanted 1\"; exit 1; }; ${NT_JUNIT} ${NT_OUT}/junit_run/junit.xml --tests 4 --failures 2 --errors 0 --skipped 0 --failed it_unexpected_pass/reentrant --failed it_unexpected_fail/reentrant --property it_pass/reentrant verdict PASS --property it_unexpected_pass/reentrant verdict PASS --text it_unexpected_fail/reentrant 'first divergence: steps/1/grads/'")

# Every junit outcome and XML-hostile text, from a crafted summary through
# merge: markup, quotes, a control character (becomes U+FFFD), tab, newline.
add_test(NAME nightly.junit_outcomes_and_escaping
  COMMAND bash -c "set -e; ${NT_TOOL} craft ${NT_OUT}/crafted; rc=0; ${NT_CV} merge ${NT_OUT}/crafted_merged ${NT_OUT}/crafted || rc=$?; [ $rc -eq 1 ]; ${NT_JUNIT} ${NT_OUT}/crafted_merged/junit.xml --tests 8 --failures 3 --errors 1 --skipped 1 --failed bug_case/stale_input --failed bad_case/reentrant --failed mem_case/recompute_elided --errored 'err_case/*' --property bug_case/no_rng_stash max_scaled_ulp inf --property bug_case/no_rng_stash raw_max_ulp inf --property ok_case/nonreentrant verdict NOISE --property ok_case/nonreentrant max_scaled_ulp 2.5 --property ok_case/nonreentrant raw_max_ulp 1648106509 --text bad_case/reentrant $'a<b & c>d \"quoted\" \\'single\\' \\xef\\xbf\\xbdctl\\ttab\\nnewline ]]>' --text bad_case/reentrant 'first divergence: steps/2/grads/l1.bias [3] <&>'")

# --compare-to: a previous run whose expected FAIL is planted as a PASS makes
# today's FAIL a regression (exit 1); a rerun against the real run is clean.
add_test(NAME nightly.compare_setup COMMAND ${NT_EXPECT} 0 "all verdicts as expected" -- ${NT_CV} ${NT_PAIR} --out ${NT_OUT}/previous)
set_tests_properties(nightly.compare_setup PROPERTIES FIXTURES_SETUP nightly_previous)
# The regression also reaches summary.json ("regressions") and junit.xml (a
# failing testcase): a job that exits 1 never publishes a green report.
add_test(NAME nightly.compare_reports_planted_regression
  COMMAND bash -c "set -e; ${NT_TOOL} set-verdict ${NT_OUT}/previous ${NT_OUT}/planted mlp_no_preserve_rng reentrant PASS; ${NT_EXPECT} 1 'REGRESSION +mlp_no_preserve_rng/reentrant: verdict PASS -> FAIL' '^1 regression\\(s\\) against ' -- ${NT_CV} ${NT_PAIR_SH} --out ${NT_OUT}/after_planted --compare-to ${NT_OUT}/planted; ${CKPT_PYTHON} -c \"import json,sys,xml.etree.ElementTree as E; d='${NT_OUT}/after_planted'; r=json.load(open(d+'/summary.json'))['regressions']; s=E.parse(d+'/junit.xml').getroot(); f=int(s.get('failures')); c=[t for t in s.iter('testcase') if t.get('classname')=='ckpt-verify.regressions']; ok=len(r)==1 and r[0]['case']=='mlp_no_preserve_rng' and f>=1 and len(c)==1 and c[0].find('failure') is not None; sys.exit(0 if ok else 'regressions %s, junit failures %d, regression testcases %d' % (r, f, len(c)))\"")
add_test(NAME nightly.compare_rerun_is_clean
  COMMAND ${NT_EXPECT} 0 "^0 regression\\(s\\) against .*4 record\\(s\\) in both, 0 new, 0 removed"
  -- ${NT_CV} ${NT_PAIR} --out ${NT_OUT}/rerun --compare-to ${NT_OUT}/previous)
set_tests_properties(nightly.compare_reports_planted_regression nightly.compare_rerun_is_clean
  PROPERTIES FIXTURES_REQUIRED nightly_previous)
add_test(NAME nightly.compare_missing_previous_is_usage_error
  COMMAND ${NT_EXPECT} 2 "^ckpt-verify: ${NT_OUT}/nowhere: no such run directory or summary file$"
  -- ${NT_CV} ${NT_PAIR} --out ${NT_OUT}/missing --compare-to ${NT_OUT}/nowhere)
add_test(NAME nightly.compare_corrupt_previous_is_usage_error
  COMMAND bash -c "mkdir -p ${NT_OUT}/corrupt && echo '{\"records\": [' > ${NT_OUT}/corrupt/summary.json && ${NT_EXPECT} 2 'corrupt/summary.json:.*not a ckpt-verify summary' -- ${NT_CV} ${NT_PAIR_SH} --out ${NT_OUT}/corrupt_run --compare-to ${NT_OUT}/corrupt")

# Two shards merged give the unsharded run's records, order and verdicts.
add_test(NAME nightly.shards_merge_to_unsharded
  COMMAND bash -c "set -e; for s in all 1/2 2/2; do d=${NT_OUT}/shard_$(echo $s | tr / _); if [ $s = all ]; then a=; else a=\"--shard $s\"; fi; ${NT_CV} --suite smoke $a --out $d >/dev/null 2>&1; done; ${NT_CV} merge ${NT_OUT}/merged ${NT_OUT}/shard_1_2 ${NT_OUT}/shard_2_2; ${NT_TOOL} same-verdicts ${NT_OUT}/shard_all ${NT_OUT}/merged; ${NT_JUNIT} ${NT_OUT}/merged/junit.xml --failures 0 --errors 0")
# A merged directory holds its reports: the shards' directories moved away
# after their jobs (a CI matrix's artifacts), the merge puts each case's
# .h5 into the merged directory, records name it relative to it, and the
# directory judges again after it is moved itself.
add_test(NAME nightly.merged_dir_holds_its_reports
  COMMAND bash -c "set -e; d=${NT_OUT}/self_contained; rm -rf $d; for s in 1/2 2/2; do ${NT_CV} ${NT_PAIR_SH} --shard $s --out $d/jobs/$(echo $s | tr / _) >/dev/null; done; mv $d/jobs $d/artifacts; ${NT_CV} merge $d/merged $d/artifacts/1_2 $d/artifacts/2_2 >/dev/null; mv $d/merged $d/moved; ${NT_TOOL} holds-its-reports $d/moved; cd $d/moved && ${NT_CV} judge --out $d/again *.h5 | tail -1")
# A reused --out holds its latest run's reports only: a report the previous
# summary named and this run did not write again is removed, in one line;
# a file no summary named stays, and a run of the same cases removes nothing.
add_test(NAME nightly.reused_out_keeps_only_its_own_reports
  COMMAND bash -c "set -e; d=${NT_OUT}/reused; rm -rf $d; ${NT_CV} --case bias_gelu_bs1 --out $d >/dev/null; touch $d/mine.h5; out=$(${NT_CV} --case mlp_no_preserve_rng --out $d); grep -q '^removed 1 report(s) of the previous run in .*/reused that this run did not write again' <<<\"$out\" || { echo \"$out\"; exit 1; }; test ! -e $d/bias_gelu_bs1.h5; test -e $d/mine.h5; test -e $d/mlp_no_preserve_rng.h5; out=$(${NT_CV} --case mlp_no_preserve_rng --out $d); ! grep -q '^removed' <<<\"$out\"; test -e $d/mlp_no_preserve_rng.h5; ls $d")
add_test(NAME nightly.merge_refuses_a_shard_twice
  COMMAND ${NT_EXPECT} 2 "is in both .* \\(the same shard twice\\?\\)" -- ${NT_CV} merge ${NT_OUT}/twice ${NT_OUT}/previous ${NT_OUT}/previous)
set_tests_properties(nightly.merge_refuses_a_shard_twice PROPERTIES FIXTURES_REQUIRED nightly_previous)
add_test(NAME nightly.bad_shard_is_usage_error
  COMMAND ${NT_EXPECT} 2 "--shard: '3/2': K must not exceed N" -- ${NT_CV} --shard 3/2)

# The nightly suite covers every shipped case a CPU can run: every case not
# labelled gpu is labelled nightly.
add_test(NAME nightly.suite_covers_every_cpu_case
  COMMAND bash -c "missing=$(${NT_CV} --list | grep -v 'labels:.*\\bgpu\\b' | grep -v 'labels:.*\\bbench' | grep -v 'labels:.*\\bnightly\\b'); [ -z \"$missing\" ] || { echo \"not in the nightly suite:\"; echo \"$missing\"; exit 1; }; ${NT_CV} --list | grep -c 'labels:.*nightly'")

# scripts/nightly.sh twice, keeping one run: the second compares with the
# first, the first is pruned, and the script exits with the suite's code.
add_test(NAME nightly.script_compares_and_prunes
  COMMAND bash -c "set -e; root=${NT_OUT}/script; rm -rf $root; export CKPT_VERIFY=${NT_CV} CKPT_NIGHTLY_DIR=$root CKPT_NIGHTLY_KEEP=1 CKPT_NIGHTLY_ARGS='${NT_PAIR_SH}'; bash ${CMAKE_SOURCE_DIR}/scripts/nightly.sh >$root.1.log 2>&1 || { cat $root.1.log; exit 1; }; grep -q 'no earlier run to compare with' $root.1.log; first=$(ls $root); sleep 1; bash ${CMAKE_SOURCE_DIR}/scripts/nightly.sh >$root.2.log 2>&1 || { cat $root.2.log; exit 1; }; cat $root.2.log; grep -q \"^compare to .*$first\" $root.2.log; [ $(ls $root | wc -l) -eq 1 ]; [ ! -e $root/$first ]; test -s $root/$(ls $root)/junit.xml")

# What a CUDA build would get for a gpu case: the generator, told CUDA is
# there, gives it RESOURCE_GROUPS gpus:1 and the launcher that maps the
# allocated GPU to cuda:0; a CPU build omits it.
add_test(NAME nightly.case_tests_give_gpu_cases_one_gpu
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_case_tests.sh ${CMAKE_COMMAND} ${NT_CV}
    ${CMAKE_SOURCE_DIR}/tests/gen_case_tests.cmake ${CMAKE_SOURCE_DIR}/tests/data/nightly_gpu_cases.ini ${NT_OUT}/gen)

# One CTest test per case (case/NAME, labels from the case file), generated
# after each build from `ckpt-verify --list`; ctest reads them through
# TEST_INCLUDE_FILES, so new cases need a build but no re-configure. A
# sanitizer build leaves them out by default: cases.nightly already runs
# every case there, in one process instead of one per case.
if(CKPT_SANITIZE)
  option(CKPT_CASE_TESTS "One CTest test per case (label case)" OFF)
else()
  option(CKPT_CASE_TESTS "One CTest test per case (label case)" ON)
endif()
if(NOT CKPT_CASE_TESTS)
  return()
endif()
set(NT_CASE_TESTS ${CMAKE_BINARY_DIR}/case_tests.cmake)
# The environment of every test (cmake/test_env.cmake), comma-separated.
string(JOIN "," NT_CASE_ENV ${CKPT_TEST_ENVIRONMENT})
set(NT_CUDA_FULL OFF)
if(CKPT_CUDA_MODE STREQUAL "full")
  set(NT_CUDA_FULL ON)
endif()
add_custom_target(case_tests ALL
  COMMAND ${CMAKE_COMMAND} -DCV=$<TARGET_FILE:ckpt-verify> -DCASES=${CMAKE_SOURCE_DIR}/cases
    -DOUT=${NT_CASE_TESTS} -DWORK=${CMAKE_BINARY_DIR}/it/cases -DCUDA_FULL=${NT_CUDA_FULL}
    -DGPU_LAUNCHER=${CMAKE_SOURCE_DIR}/tests/ctest_gpu.sh -DTEST_ENVIRONMENT=${NT_CASE_ENV}
    -P ${CMAKE_SOURCE_DIR}/tests/gen_case_tests.cmake
  BYPRODUCTS ${NT_CASE_TESTS}
  COMMENT "Writing one CTest test per case")
add_dependencies(case_tests ckpt-verify)
file(WRITE ${CMAKE_BINARY_DIR}/case_tests_include.cmake
  "if(EXISTS [=[${NT_CASE_TESTS}]=])\n  include([=[${NT_CASE_TESTS}]=])\nelse()\n"
  "  add_test(case/NOT_BUILT [=[${CMAKE_COMMAND}]=] -E echo \"build first: the per-case tests are written by the build\")\n"
  "  set_tests_properties(case/NOT_BUILT PROPERTIES WILL_FAIL TRUE)\nendif()\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/case_tests_include.cmake)

# A CI matrix's merge: with --strict a missing shard is an error (exit 2,
# one line naming it) before anything is written; without, a warning.
# Options and operands in any order; merge --help exits 0.
set(NT_STRICT ${NT_OUT}/strict)
add_test(NAME nightly.merge_strict_refuses_a_missing_shard
  COMMAND bash -c "set -e; rm -rf ${NT_STRICT}; ${NT_CV} --suite smoke --shard 1/3 --out ${NT_STRICT}/s1 >/dev/null 2>&1; ${NT_CV} --suite smoke --shard 3/3 --out ${NT_STRICT}/s3 >/dev/null 2>&1; ${NT_EXPECT} 2 '^ckpt-verify: merge --strict: shard 2/3 is not among the inputs; nothing written$' -- ${NT_CV} merge ${NT_STRICT}/merged ${NT_STRICT}/s1 --strict ${NT_STRICT}/s3; test ! -e ${NT_STRICT}/merged/summary.json; test ! -e ${NT_STRICT}/merged/junit.xml; ${NT_EXPECT} 0 '^merge: warning: shard 2/3 is not among the inputs$' -- ${NT_CV} merge ${NT_STRICT}/lenient ${NT_STRICT}/s1 ${NT_STRICT}/s3; ${NT_EXPECT} 0 '^usage: ckpt-verify merge \\[--strict\\] OUT_DIR DIR' -- ${NT_CV} merge --help")

# The nightly suite's size the README and docs state is the size the tool
# reports (`--suite nightly --list`: one line per case, its impl count).
add_test(NAME docs.nightly_figures_match_the_suite
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_docs_figures.py ${NT_CV} ${CMAKE_SOURCE_DIR})
set_tests_properties(docs.nightly_figures_match_the_suite PROPERTIES LABELS "docs")
# --list honours --suite: only the suite's cases, each with its impl count.
add_test(NAME cli.list_of_a_suite_is_the_suite
  COMMAND bash -c "${NT_CV} --suite smoke --list > ${NT_OUT}_smoke_list.txt && test $(wc -l < ${NT_OUT}_smoke_list.txt) -eq $(${NT_CV} --list | grep -c 'labels:.*\\bsmoke\\b') && ! grep -v '  impls: [0-9]\\+  labels:.*smoke' ${NT_OUT}_smoke_list.txt")
set_tests_properties(cli.list_of_a_suite_is_the_suite PROPERTIES LABELS "docs")
