# report.html (label `html`): the page every run directory gets, checked in
# a real browser (headless chromium via chromium-driver and selenium,
# tests/check_html_report.py; Skipped with the reason where they are not
# installed) and as a file. The fixture is one run directory with every
# verdict kind: a harness run (PASS, MEMFAIL, FAIL) judged with crafted
# files (NOISE, and an unexpected ERROR).
set(CV $<TARGET_FILE:ckpt-verify>)
set(HTML_OUT ${CMAKE_BINARY_DIR}/html)
set(HTML_CHECK ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_html_report.py)
set(HTML_RUN ${HTML_OUT}/fixture/all)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)

add_test(NAME html.setup_a_run_with_every_verdict
  COMMAND ${HTML_CHECK} setup ${CV} ${CMAKE_BINARY_DIR}/judge/files ${HTML_OUT}/fixture)
set_tests_properties(html.setup_a_run_with_every_verdict PROPERTIES
  FIXTURES_SETUP html_run FIXTURES_REQUIRED judge_files LABELS "html")

function(html_test name)
  add_test(NAME html.${name} COMMAND ${ARGN})
  set_tests_properties(html.${name} PROPERTIES FIXTURES_REQUIRED html_run LABELS "html" SKIP_RETURN_CODE 77)
endfunction()

# In the browser.
html_test(counts_on_the_page_are_the_summarys ${HTML_CHECK} counts ${HTML_RUN})
html_test(filter_to_fail_shows_exactly_the_fail_rows ${HTML_CHECK} filter ${HTML_RUN})
html_test(a_click_on_a_header_sorts_the_rows_by_it ${HTML_CHECK} sort ${HTML_RUN})
html_test(a_rows_link_opens_its_case_with_the_summarys_first_divergence ${HTML_CHECK} follow ${HTML_RUN})
html_test(a_screenshot_of_the_page_is_not_blank ${HTML_CHECK} screenshot ${HTML_RUN} ${HTML_OUT}/screenshot.png)
html_test(with_scripts_off_every_row_and_case_is_readable ${HTML_CHECK} noscript ${HTML_RUN})
html_test(crafted_names_show_as_text_and_run_nothing
  ${HTML_CHECK} crafted ${CV} ${HTML_RUN} ${HTML_OUT}/crafted)
html_test(regressions_of_compare_to_are_counted_and_shown_in_their_case
  ${HTML_CHECK} regressions ${HTML_OUT}/fixture/again)
# As a file. The judge's per-tensor distances in summary.json agree with
# its verdicts (no browser needed).
html_test(the_judge_records_each_differing_tensors_distance_and_limit ${HTML_CHECK} recorded ${HTML_RUN})
set_tests_properties(html.the_judge_records_each_differing_tensors_distance_and_limit PROPERTIES LABELS "html;judge")
html_test(the_page_refers_to_nothing_outside_itself ${HTML_CHECK} self_contained ${HTML_RUN})
# Per tensor: each FAIL's and NOISE's distances, as the judge recorded
# them in summary.json (tensor_distances), farthest first.
html_test(a_fail_or_noise_shows_its_tensor_distances_as_recorded ${HTML_CHECK} tensors ${HTML_RUN})
# The commands that write a summary write the page: a run, judge --out
# (the fixture's), merge; `html DIR` rewrites it for an old directory.
html_test(a_run_writes_report_html bash -c "test -s ${HTML_OUT}/fixture/run/report.html && grep -q 'none_bs4' ${HTML_OUT}/fixture/run/report.html")
# issue 50: the header's wall time is the command's own, measured (process
# start to summary, library loading included), the cases' times within it.
html_test(the_header_states_the_commands_measured_wall_time bash -c
  "grep -Eq '<dt>wall time</dt><dd>[0-9.e+]+ s, this command \\(start to summary\\). of it [0-9.e+]+ s in [0-9]+ case' ${HTML_OUT}/fixture/run/report.html && grep -Eq '\"wall_seconds\": [0-9]' ${HTML_OUT}/fixture/run/summary.json")
html_test(merge_writes_report_html bash -c
  "rm -rf ${HTML_OUT}/merged && ${CV} merge ${HTML_OUT}/merged ${HTML_OUT}/fixture/run >/dev/null && grep -q 'none_bs4' ${HTML_OUT}/merged/report.html")
html_test(html_rewrites_the_page_of_an_old_run_directory bash -c
  "d=${HTML_OUT}/old && rm -rf $d && mkdir -p $d && cp ${HTML_RUN}/summary.json $d/ && ${CV} html $d && test -s $d/report.html && grep -q 'id=\"verdict-table\"' $d/report.html")
# Without a working gnuplot the page is still written and says why.
html_test(a_failing_gnuplot_leaves_a_page_that_says_why_plots_are_absent bash -c
  "d=${HTML_OUT}/noplots && rm -rf $d && mkdir -p $d && cp ${HTML_RUN}/summary.json $d/ && CKPT_GNUPLOT=${CMAKE_SOURCE_DIR}/tests/fake_gnuplot_fails.sh ${CV} html $d 2>/dev/null && grep -q 'Plots absent: gnuplot failed' $d/report.html && ! grep -q '<svg' $d/report.html && test -z \"$(ls -A $d | grep -v -e summary.json -e report.html)\"")
html_test(without_gnuplot_the_page_says_it_was_not_found bash -c
  "d=${HTML_OUT}/nognuplot && rm -rf $d && mkdir -p $d && cp ${HTML_RUN}/summary.json $d/ && CKPT_GNUPLOT=/nonexistent/gnuplot ${CV} html $d && grep -q 'Plots absent: plot: /nonexistent/gnuplot not found' $d/report.html")
html_test(plots_switched_off_leave_a_page_that_says_so bash -c
  "d=${HTML_OUT}/plotsoff && rm -rf $d && mkdir -p $d && cp ${HTML_RUN}/summary.json $d/ && CKPT_GNUPLOT=none ${CV} html $d && grep -q 'Plots absent: plots switched off (CKPT_GNUPLOT=none)' $d/report.html && ! grep -q '<svg' $d/report.html")
# The plots are drawn in a scratch folder under TMPDIR, never in the run
# directory (a run killed while drawing would leave it there).
html_test(plots_are_drawn_under_tmpdir_not_in_the_run_directory bash -c
  "d=${HTML_OUT}/plotstmp && rm -rf $d && mkdir -p $d && cp ${HTML_RUN}/summary.json $d/ && TMPDIR=/nonexistent/scratch ${CV} html $d && grep -q 'no room to draw them in /nonexistent/scratch' $d/report.html && test -z \"$(ls -A $d | grep -v -e summary.json -e report.html)\"")

# The command's edges, as the other subcommands'.
add_test(NAME html.a_directory_without_a_summary_exits_2_in_one_line
  COMMAND ${EXPECT_ERROR} 2 "html: .*: not a run directory \\(no summary.json\\)" -- ${CV} html ${CMAKE_SOURCE_DIR}/docs)
add_test(NAME html.a_missing_directory_exits_2_in_one_line
  COMMAND ${EXPECT_ERROR} 2 "html: /nonexistent/run: not a run directory \\(no such directory\\)" -- ${CV} html /nonexistent/run)
add_test(NAME html.a_misspelt_option_gets_did_you_mean
  COMMAND ${EXPECT_ERROR} 2 "did you mean: --help" -- ${CV} html --hepl x)
add_test(NAME html.a_misspelt_subcommand_gets_did_you_mean
  COMMAND ${EXPECT_ERROR} 2 "did you mean: html" -- ${CV} htlm x)
add_test(NAME html.help_names_the_page
  COMMAND ${EXPECT} 0 "usage: ckpt-verify html RUN_DIR" "self-contained" -- ${CV} html --help)
set_tests_properties(html.a_directory_without_a_summary_exits_2_in_one_line html.a_missing_directory_exits_2_in_one_line
  html.a_misspelt_option_gets_did_you_mean html.a_misspelt_subcommand_gets_did_you_mean html.help_names_the_page
  PROPERTIES LABELS "html")
