# Faults (issue 16, "Reports people can trust"): usage errors found before
# any work, so nothing is written and a previous report in --out is kept;
# write failures, FIFOs, shared output directories, memory bombs and
# crafted HDF5 files. Every test here fails on the harness before the fix.
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)
set(WRITES_NOTHING ${CMAKE_SOURCE_DIR}/tests/writes_nothing.sh)
set(BAD_CASES ${CMAKE_SOURCE_DIR}/tests/data/cases)
set(FAULTS_OUT ${CMAKE_BINARY_DIR}/it/faults)
set(PREVIOUS ${FAULTS_OUT}/previous)

# ---- usage errors: one line, exit 2, the previous report untouched --------
add_test(NAME faults.usage.make_previous_report
  COMMAND bash -c "rm -rf ${PREVIOUS} && ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${PREVIOUS} >/dev/null && test -s ${PREVIOUS}/summary.json && test -s ${PREVIOUS}/junit.xml")
set_tests_properties(faults.usage.make_previous_report PROPERTIES FIXTURES_SETUP previous_report LABELS "robust")

# usage_error(NAME REGEX ARGS...): run ARGS into the previous report's --out.
function(usage_error name regex)
  add_test(NAME faults.usage.${name}
    COMMAND ${WRITES_NOTHING} ${PREVIOUS} 2 "^ckpt-verify: ${regex}" -- ${CV} --cases ${BAD_CASES}/good.ini ${ARGN})
  set_tests_properties(faults.usage.${name} PROPERTIES FIXTURES_REQUIRED previous_report LABELS "robust" TIMEOUT 60)
endfunction()
usage_error(device_garbage "--device: unknown device 'garbage!'" --case tiny_bs1 --device garbage! --out ${PREVIOUS})
usage_error(device_cuda99 "--device: device cuda:99 requested but" --case tiny_bs1 --device cuda:99 --out ${PREVIOUS})
usage_error(impl_empty "--impl: empty impl name in ''" --case tiny_bs1 --impl= --out ${PREVIOUS})
usage_error(impl_empty_entry "--impl: empty impl name in 'none,,reentrant'" --case tiny_bs1 --impl none,,reentrant --out ${PREVIOUS})
usage_error(impl_repeated "--impl: impl 'reentrant' named twice$" --case tiny_bs1 --impl reentrant,reentrant --out ${PREVIOUS})
usage_error(threads_over_case_file_limit "--threads: '100000' is not a valid number: expected an integer 1\\.\\.1024$" --case tiny_bs1 --threads 100000 --out ${PREVIOUS})
usage_error(seed_negative "--seed: '-1' is not a valid number: expected an integer 0\\.\\.18446744073709551615$" --case tiny_bs1 --seed -1 --out ${PREVIOUS})
usage_error(unknown_flag_one_line "unknown option '--bogus' \\(see --help\\)$" --bogus --out ${PREVIOUS})
usage_error(flag_without_value "option '--out' needs a value \\(see --help\\)$" --case tiny_bs1 --out)

# A device no machine has, in a case file: refused before --out exists.
add_test(NAME faults.usage.case_file_device_cuda99
  COMMAND ${WRITES_NOTHING} ${FAULTS_OUT}/cuda99 2 "^ckpt-verify: .*cuda99\\.ini:2: case on_cuda99: device cuda:99 requested but"
  -- ${CV} --cases ${BAD_CASES}/cuda99.ini --case on_cuda99 --out ${FAULTS_OUT}/cuda99)
# --out a regular file, or longer than a report path can hold whole.
add_test(NAME faults.usage.out_is_a_regular_file
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && echo keep > ${FAULTS_OUT}/plain_file && ${WRITES_NOTHING} ${FAULTS_OUT}/plain_file 2 'plain_file: exists and is not a directory$' -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${FAULTS_OUT}/plain_file")
add_test(NAME faults.usage.out_path_too_long
  COMMAND bash -c "long=${FAULTS_OUT}/$(printf 'd%.0s' {1..200})/$(printf 'e%.0s' {1..200})/$(printf 'f%.0s' {1..200})/$(printf 'g%.0s' {1..200})/$(printf 'h%.0s' {1..200}); ${WRITES_NOTHING} ${FAULTS_OUT}/$(printf 'd%.0s' {1..200}) 2 '^ckpt-verify: --out: path is [0-9]+ bytes long, more than the 920 accepted$' -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out $long")
set_tests_properties(faults.usage.case_file_device_cuda99 faults.usage.out_is_a_regular_file faults.usage.out_path_too_long
  PROPERTIES LABELS "robust" TIMEOUT 60)

# ---- write failures and shared output directories ---------------------------
# Two runs into one --out at once: unique temporaries, whole files, exit 0.
add_test(NAME faults.out.two_runs_into_one_out
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/concurrent_out.sh ${CV} ${BAD_CASES}/good.ini tiny_bs1 ${FAULTS_OUT}/shared_out 6)
set_tests_properties(faults.out.two_runs_into_one_out PROPERTIES LABELS "robust" TIMEOUT 120)
# Two runs into one --out that holds a previous run of both cases, started
# 0, 0.1, 0.2 and 0.6 s apart, of different cases or the same one: each
# keeps every report it announces, summary.json names every case either ran
# and only files that exist (issue 49; the directory's lock, stale_reports.h).
foreach(mode different same)
  foreach(offset 0 0.1 0.2 0.6)
    add_test(NAME faults.out.overlapping_runs_keep_their_reports_${mode}_${offset}s
      COMMAND bash ${CMAKE_SOURCE_DIR}/tests/concurrent_runs.sh ${CV} ${BAD_CASES}/concurrent.ini
        ${FAULTS_OUT}/overlap_${mode}_${offset} ${mode} ${offset})
    set_tests_properties(faults.out.overlapping_runs_keep_their_reports_${mode}_${offset}s PROPERTIES
      LABELS "robust" TIMEOUT 120)
  endforeach()
endforeach()

# ---- FIFOs: refused in one line instead of blocking for ever ---------------
# (TIMEOUT 20: a hang fails the test.)
set(FIFOS ${FAULTS_OUT}/fifos)
add_test(NAME faults.fifo.make
  COMMAND bash -c "rm -rf ${FIFOS} && mkdir -p ${FIFOS}/cases ${FIFOS}/run && cp ${BAD_CASES}/good.ini ${FIFOS}/cases/ && mkfifo ${FIFOS}/cases/blocked.ini ${FIFOS}/run/summary.json ${FIFOS}/report.h5")
set_tests_properties(faults.fifo.make PROPERTIES FIXTURES_SETUP fifos LABELS "robust")
function(fifo_refused name regex)
  add_test(NAME faults.fifo.${name} COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: ${regex}" -- ${CV} ${ARGN})
  set_tests_properties(faults.fifo.${name} PROPERTIES FIXTURES_REQUIRED fifos LABELS "robust" TIMEOUT 20)
endfunction()
fifo_refused(in_cases_dir ".*/blocked\\.ini: not a regular file" --cases ${FIFOS}/cases --list)
fifo_refused(compare_to_summary ".*/run/summary\\.json: not a regular file, not a summary$"
  --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${FIFOS}/out --compare-to ${FIFOS}/run)
fifo_refused(plot_summary ".*/run/summary\\.json: not a regular file, not a summary$" plot ${FIFOS}/run)
fifo_refused(judge_file ".*/report\\.h5: not a regular file, not an HDF5 file$" judge ${FIFOS}/report.h5)
fifo_refused(diff_file ".*/report\\.h5: not a regular file, not an HDF5 file$" diff ${FIFOS}/report.h5 ${FIFOS}/report.h5)

# ---- data in other files: refused, never followed ---------------------------
set(EXT ${FAULTS_OUT}/external)
add_test(NAME faults.external.make
  COMMAND bash -c "rm -rf ${EXT} && ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${EXT} >/dev/null && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_external_h5.py ${EXT}/tiny_bs1.h5 ${EXT}")
set_tests_properties(faults.external.make PROPERTIES FIXTURES_SETUP external_h5 LABELS "robust")
function(external_refused name regex)
  add_test(NAME faults.external.${name} COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: ${regex}" -- ${CV} diff ${EXT}/tiny_bs1.h5 ${ARGN})
  set_tests_properties(faults.external.${name} PROPERTIES FIXTURES_REQUIRED external_h5 LABELS "robust" TIMEOUT 20)
endfunction()
external_refused(run_link ".*/ext_run\\.h5: /runs/baseline_0: external link to another file is not supported$" ${EXT}/ext_run.h5)
external_refused(run_link_named ".*/ext_run\\.h5: /runs/baseline_0: external link to another file is not supported$" ${EXT}/ext_run.h5:baseline_0)
external_refused(step_link ".*/ext_step\\.h5: /runs/baseline_0/steps/1: external link to another file is not supported$" ${EXT}/ext_step.h5)
external_refused(storage ".*/ext_storage\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: data stored in other files \\(external storage\\) is not supported$" ${EXT}/ext_storage.h5)

# ---- merge and summaries: inputs that would mislead -------------------------
set(MERGE ${FAULTS_OUT}/merge)
add_test(NAME faults.merge.make
  COMMAND bash -c "rm -rf ${MERGE} && mkdir -p ${MERGE} && ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${MERGE}/shard >/dev/null && cp -r ${MERGE}/shard \"${MERGE}/$(printf 'sh\\377ard')\" && cp -r ${MERGE}/shard ${MERGE}/negative && ${CKPT_PYTHON} -c \"import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['records'][0]['raw_max_ulp']=-5; json.dump(d,open(p,'w'))\" ${MERGE}/negative/summary.json")
set_tests_properties(faults.merge.make PROPERTIES FIXTURES_SETUP merge_inputs LABELS "robust")
# The output directory given as an input too: its summary.json would be overwritten.
add_test(NAME faults.merge.output_is_an_input
  COMMAND ${WRITES_NOTHING} ${MERGE}/shard 2 "^ckpt-verify: merge: output directory .*/shard is also an input \\(.*/shard/\\)$"
  -- ${CV} merge ${MERGE}/shard ${MERGE}/shard/)
# A negative raw_max_ulp is no summary: believed, it made a false REGRESSION.
add_test(NAME faults.summary.negative_max_ulp_refused
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: .*/negative/summary\\.json: not a ckpt-verify summary: record 0: \"raw_max_ulp\" is -5: expected a number >= 0$"
  -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${MERGE}/compared --compare-to ${MERGE}/negative)
# A shard directory whose name is not UTF-8 stays in merged_from (escaped).
add_test(NAME faults.merge.non_utf8_dir_kept
  COMMAND bash -c "rm -rf ${MERGE}/merged && ${CV} merge ${MERGE}/merged ${MERGE}/sh?ard >/dev/null && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_merged_from.py ${MERGE}/merged/summary.json 1")
set_tests_properties(faults.merge.output_is_an_input faults.summary.negative_max_ulp_refused faults.merge.non_utf8_dir_kept
  PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)

# ---- diff: a file whose name holds a colon is that file ---------------------
add_test(NAME faults.diff.colon_in_existing_file_name
  COMMAND bash -c "mkdir -p ${MERGE} && cp ${MERGE}/shard/tiny_bs1.h5 '${MERGE}/copy.h5:v2' && ${EXPECT} 0 'bitwise identical' -- ${CV} diff '${MERGE}/copy.h5:v2' ${MERGE}/shard/tiny_bs1.h5")
set_tests_properties(faults.diff.colon_in_existing_file_name PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)

# ---- memory bombs -------------------------------------------------------------
# One never-written 16 MiB gradient hard-linked 6 times in a 57 KiB file.
# diff and judge read runs as stored tensors and hold a few at a time
# (diff 2, judge 4), so links cost nothing; what must fit is the largest
# dataset that many times, refused from the shapes before loading anything,
# naming the file, the run and the limit.
add_test(NAME faults.memory.diff_largest_dataset_held_twice_bounded
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_memory_bomb_h5.py ${MERGE}/shard/tiny_bs1.h5 ${FAULTS_OUT}/bomb.h5 && CKPT_MEMORY_LIMIT=16M ${EXPECT_ERROR} 2 '^ckpt-verify: .*/bomb\\.h5:/runs/baseline_0 with .*: the largest dataset claims 16\\.0 MiB and 2 are held at once \\(32\\.0 MiB\\), more than the 16\\.0 MiB memory limit \\(CKPT_MEMORY_LIMIT\\); nothing loaded$' -- ${CV} diff ${FAULTS_OUT}/bomb.h5 ${FAULTS_OUT}/bomb.h5")
set_tests_properties(faults.memory.diff_largest_dataset_held_twice_bounded PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
add_test(NAME faults.memory.judge_largest_dataset_held_four_times_bounded
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_memory_bomb_h5.py ${MERGE}/shard/tiny_bs1.h5 ${FAULTS_OUT}/bomb_judge.h5 && CKPT_MEMORY_LIMIT=32M ${EXPECT_ERROR} 2 '^ckpt-verify: .*/bomb_judge\\.h5: the largest dataset claims 16\\.0 MiB and 4 are held at once \\(64\\.0 MiB\\), more than the 32\\.0 MiB memory limit \\(CKPT_MEMORY_LIMIT\\); nothing loaded$' -- ${CV} judge ${FAULTS_OUT}/bomb_judge.h5")
set_tests_properties(faults.memory.judge_largest_dataset_held_four_times_bounded PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
# The six links to the 16 MiB dataset claim 96 MiB when counted per name;
# under a 64 MiB limit diff still compares the file with itself (each link
# is one object on both sides: nothing is loaded twice).
add_test(NAME faults.memory.diff_hard_links_cost_nothing_more
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_memory_bomb_h5.py ${MERGE}/shard/tiny_bs1.h5 ${FAULTS_OUT}/bomb_links.h5 && CKPT_MEMORY_LIMIT=64M ${EXPECT} 0 '0 differ' -- ${CV} diff ${FAULTS_OUT}/bomb_links.h5 ${FAULTS_OUT}/bomb_links.h5")
set_tests_properties(faults.memory.diff_hard_links_cost_nothing_more PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
# Without CKPT_MEMORY_LIMIT: a 3 GiB dataset (6 GiB held by diff) claimed
# by a small file is refused up front against the default read limit,
# named as such (not a "0-byte limit" after loading 4 GiB).
add_test(NAME faults.memory.diff_6g_claim_refused_up_front_default_limit
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_memory_bomb_h5.py ${MERGE}/shard/tiny_bs1.h5 ${FAULTS_OUT}/bomb6g.h5 786432 && env -u CKPT_MEMORY_LIMIT ${EXPECT_ERROR} 2 '^ckpt-verify: .*/bomb6g\\.h5:/runs/baseline_0 with .*: the largest dataset claims 3\\.0 GiB and 2 are held at once \\(6\\.0 GiB\\), more than the [0-9.]+ [MG]iB (a read may load \\(the default; CKPT_MEMORY_LIMIT sets another\\)|memory limit \\([a-zA-Z ,-]+\\)); nothing loaded$' -- ${CV} diff ${FAULTS_OUT}/bomb6g.h5 ${FAULTS_OUT}/bomb6g.h5")
set_tests_properties(faults.memory.diff_6g_claim_refused_up_front_default_limit PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
if(NOT CKPT_SANITIZE) # ASan cannot start under an address space limit
  # Under ulimit -v the limit that applies is RLIMIT_AS, and it is named.
  add_test(NAME faults.memory.diff_under_ulimit_v_names_file_and_limit
    COMMAND bash -c "mkdir -p ${FAULTS_OUT} && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_memory_bomb_h5.py ${MERGE}/shard/tiny_bs1.h5 ${FAULTS_OUT}/bomb_as.h5 393216 && ulimit -v 3000000 && env -u CKPT_MEMORY_LIMIT ${EXPECT_ERROR} 2 '^ckpt-verify: .*/bomb_as\\.h5:/runs/baseline_0 with .*: the largest dataset claims 1\\.5 GiB and 2 are held at once \\(3\\.0 GiB\\), more than the 2\\.[0-9] GiB memory limit \\(RLIMIT_AS, ulimit -v\\)' -- ${CV} diff ${FAULTS_OUT}/bomb_as.h5 ${FAULTS_OUT}/bomb_as.h5")
  set_tests_properties(faults.memory.diff_under_ulimit_v_names_file_and_limit PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
endif()
# 20,001 plain [case:] sections are capped like sweeps' members.
add_test(NAME faults.memory.too_many_plain_cases
  COMMAND bash -c "mkdir -p ${FAULTS_OUT} && for i in $(seq 0 20000); do printf '[case:c%d]\\nlayers = 1\\n' $i; done > ${FAULTS_OUT}/plain_20001.ini && ${EXPECT_ERROR} 2 '^ckpt-verify: .*plain_20001\\.ini:40001: case .c20000. is one more than the 20000 loaded cases allowed in all$' -- ${CV} --cases ${FAULTS_OUT}/plain_20001.ini --list")
set_tests_properties(faults.memory.too_many_plain_cases PROPERTIES LABELS "robust" TIMEOUT 120)
# 30,000 cases from three sweeps: refused at once, before expanding (TIMEOUT 20).
add_test(NAME faults.memory.too_many_cases_in_all
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: .*sweeps2\\.ini:2: \\[sweep:s2\\] expands to 10000 cases, more than the 20000 loaded cases allowed in all \\(20000 already\\)$"
  -- ${CV} --cases ${BAD_CASES}/too_many --list)
set_tests_properties(faults.memory.too_many_cases_in_all PROPERTIES LABELS "robust" TIMEOUT 20)

# A run the file does not hold: the one line lists the runs it does.
add_test(NAME faults.diff.missing_run_lists_runs
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: .*/tiny_bs1\\.h5: /runs/nope: run missing \\(runs in the file: baseline_0, baseline_1, nonreentrant, reentrant\\)$"
  -- ${CV} diff ${MERGE}/shard/tiny_bs1.h5:nope ${MERGE}/shard/tiny_bs1.h5)
set_tests_properties(faults.diff.missing_run_lists_runs PROPERTIES FIXTURES_REQUIRED merge_inputs LABELS "robust" TIMEOUT 60)
