/* judge: `ckpt-verify judge [--out DIR] [--compare-to DIR] FILE.h5...` gives
 * verdicts from the runs stored in report files, whoever wrote them, and
 * what got worse since an earlier summary (regress.h). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "error.h"
#include "h5store.h"
#include "judge.h"
#include "junit.h"
#include "mutation_matrix.h"
#include "regress.h"
#include "report.h"
#include "summary_file.h"

/* judge [--out DIR] FILE.h5...: verdicts from the runs stored in reports,
 * whoever wrote them. Every file is judged before anything is written, so a
 * bad file (exit 2) leaves --out untouched. */
static const char judge_usage[] =
    "usage: ckpt-verify judge [-o|--out DIR] [--compare-to DIR] FILE.h5...\n";

/* Regressions against the summary in `prev_dir` (printed, and carried by
 * the summary written after): *found is how many. */
static int compare_summary(struct summary *summary, const char *prev_dir, int *found)
{
    json_t *previous = NULL, *list = json_array();
    struct regress_options ro;
    struct regress_counts counts = {0};
    regress_default_options(&ro);
    int st = list ? summary_file_load(prev_dir, &previous) : error_set(ST_INTERNAL, "compare: out of memory");
    if (!st)
        st = regress_compare(previous, summary_json(summary), prev_dir, &ro, stdout, &counts, list);
    if (!st)
        st = summary_set_regressions(summary, list);
    *found = counts.regressions;
    json_decref(list);
    json_decref(previous);
    return st;
}

/* Each file's results own their texts (judge.h case_result_free). */
static void free_results(struct case_result *results, int n)
{
    for (int i = 0; i < n; i++)
        case_result_free(&results[i]);
    free(results);
}

int cli_judge(int argc, char **argv)
{
    cli_keep_freed_memory();
    const char *out_dir = NULL, *compare_to = NULL;
    static const struct option options[] = {
        {"out", required_argument, NULL, 'o'},
        {"compare-to", required_argument, NULL, 'C'},
        {"impl-lib", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":o:h", options, NULL)) != -1) {
        switch (opt) {
        case 'o': out_dir = optarg; break;
        case 'C': compare_to = optarg; break;
        /* Reports record each run's role (a plugin's planted bugs too), so
         * the judge needs no impl code: the option stays for scripts that
         * pass it, and says it is not needed. */
        case 'L':
            fprintf(stderr, "ckpt-verify judge: --impl-lib %s is not needed: reports record which runs are "
                            "planted bugs (/runs/<run> role); ignored\n", optarg);
            break;
        case 'h':
            printf("%s\nJudges every run of each file against its baseline_* runs (per-tensor noise envelope at the\n"
                   "tensor's scale, NOISE within %gx); expectations from the file's /case expect attribute,\n"
                   "otherwise PASS or NOISE. -o/--out DIR writes summary.json, junit.xml and report.html there.\n"
                   "--compare-to DIR lists what got worse since the summary.json in DIR (verdicts, held cut, a\n"
                   "user's run's bytes above its memory statement); any regression -> exit 1.\n"
                   "exit codes: 0 all verdicts expected, 1 an unexpected verdict, 2 bad input, 3 internal error\n",
                   judge_usage, JUDGE_NOISE_MARGIN);
            return 0;
        default: return cli_option_error("judge", opt, argv[optind - 1], options);
        }
    }
    int first = optind;
    int n = argc - first;
    if (n < 1) {
        fprintf(stderr, "%s", judge_usage);
        return EXIT_USAGE;
    }
    if (out_dir && cli_check_out_dir(out_dir))
        return cli_fail(ST_INPUT);
    struct case_result *results = calloc((size_t)n, sizeof *results);
    if (!results)
        return cli_fail(error_set(ST_INTERNAL, "out of memory"));
    int st = ST_OK, bad = 0, unexpected = 0;
    /* The torch the runs were made with, as the first report names it
     * (its root libtorch_version): the judge itself links none. */
    char runs_torch[64] = "";
    struct read_budget budget;
    if ((st = cli_read_budget(&budget))) {
        free_results(results, n);
        return cli_fail(st);
    }
    for (int i = 0; i < n; i++) {
        /* Each file gets the whole budget. Judging holds at most
         * JUDGE_TENSORS_HELD tensors at once, whatever the report's size:
         * the largest dataset that many times must fit, checked from the
         * shapes before any is loaded. */
        uint64_t file_budget = budget.bytes, claimed = 0, largest = 0;
        /* The report is opened once: its size, its case and every run are
         * read through this one handle. */
        struct h5report *rep = NULL;
        memset(&results[i], 0, sizeof results[i]);
        snprintf(results[i].h5_path, sizeof results[i].h5_path, "%s", argv[first + i]);
        int claim_st = h5report_open(&rep, argv[first + i]);
        if (claim_st == ST_OK && (claim_st = h5report_claimed_bytes(rep, NULL, &claimed, &largest)) == ST_OK)
            claim_st = cli_check_held(&budget, argv[first + i], largest, JUDGE_TENSORS_HELD);
        else if (rep) {
            claim_st = ST_OK; /* judge_report names what is wrong with the file */
            error_clear();
        }
        st = claim_st ? claim_st : judge_report(rep, &file_budget, &results[i]);
        if (!st && i == 0 && h5report_read_attr_str(rep, "/", "libtorch_version", runs_torch, sizeof runs_torch)) {
            runs_torch[0] = '\0'; /* a report that names none: unknown */
            error_clear();
        }
        h5report_close(rep);
        if (st) {
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            if (st != ST_INPUT)
                break;
            bad = 1;
            st = ST_OK;
        }
    }
    if (bad || st) {
        free_results(results, n);
        return st ? EXIT_INTERNAL : EXIT_USAGE;
    }
    struct summary_torch torch = {runs_torch, NULL, NULL};
    struct summary *summary = NULL;
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION, &torch)) ||
        (st = summary_set_run(summary, "judge", 1, 1))) {
        summary_free(summary);
        free_results(results, n);
        return cli_fail(st);
    }
    int errors = 0;
    for (int i = 0; i < n && !st; i++) {
        report_print_case(stdout, &results[i]);
        for (int k = 0; k < results[i].n_results; k++)
            unexpected += !results[i].results[k].expected;
        /* A file with nothing judged is an ERROR record: never exit 0 beside it. */
        errors += results[i].n_results == 0 || results[i].status;
        st = summary_add_case_run(summary, &results[i], i, NAN);
    }
    int regressions = 0;
    if (!st && compare_to)
        st = compare_summary(summary, compare_to, &regressions);
    summary_set_wall_time(summary); /* the judge's own, measured: what the page's header says */
    if (!st && out_dir &&
        ((st = cli_make_dirs(out_dir)) || (st = junit_write_with_summary(summary_json(summary), out_dir, NULL)))) {
        summary_free(summary);
        free_results(results, n);
        return cli_fail(st);
    }
    if (!st && out_dir)
        cli_write_report_html(out_dir);
    if (!st) {
        mutation_matrix_print(stdout, summary_json(summary));
        printf("%d file(s) judged; %s%s%s\n", n,
               errors       ? "UNEXPECTED verdicts: a file with no run judged (see ERROR above)"
               : unexpected ? "UNEXPECTED verdicts (see NO above)"
                            : "all verdicts as expected",
               out_dir ? "; report in " : "", out_dir ? out_dir : "");
    }
    summary_free(summary);
    free_results(results, n);
    if (st)
        return cli_fail(st);
    return unexpected || errors || regressions ? EXIT_UNEXPECTED : 0;
}
