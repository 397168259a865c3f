/* merge: `ckpt-verify merge OUT_DIR DIR...` merges run directories (the
 * shards of one run) into one report, with its plots. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "error.h"
#include "merge.h"
#include "stale_reports.h"
#include "plot.h"

static const char merge_usage[] = "usage: ckpt-verify merge [--strict] OUT_DIR DIR...\n";

int cli_merge(int argc, char **argv)
{
    /* Options and operands in any order: --strict, --help; the rest are
     * OUT_DIR then the input run directories, gathered in place at the
     * front of argv (permuted, as getopt does). */
    const char **operands = (const char **)argv + 1;
    int n = 0, strict = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s\nMerges run directories (the shards of one run, --shard K/N) into OUT_DIR: summary.json,\n"
                   "junit.xml, the plots and report.html. A shard of the inputs' N that is missing is a warning, or with\n"
                   "--strict an error (exit 2) before anything is written.\n", merge_usage);
            return 0;
        }
        if (strcmp(argv[i], "--strict") == 0)
            strict = 1;
        else if (strncmp(argv[i], "--", 2) == 0 && argv[i][2]) {
            /* Named as every command names an unknown option, with the near ones. */
            static const struct option options[] = {
                {"strict", no_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
            return cli_option_error("merge", '?', argv[i], options);
        } else
            operands[n++] = argv[i];
    }
    if (n < 2) {
        fprintf(stderr, "%s", merge_usage);
        return EXIT_USAGE;
    }
    int st, unexpected = 0;
    /* The output would overwrite that input's summary.json with the merge. */
    struct stat out_sb, in_sb;
    if (stat(operands[0], &out_sb) == 0)
        for (int i = 1; i < n; i++)
            if (stat(operands[i], &in_sb) == 0 && in_sb.st_dev == out_sb.st_dev && in_sb.st_ino == out_sb.st_ino) {
                fprintf(stderr, "ckpt-verify: merge: output directory %s is also an input (%s)\n", operands[0],
                        operands[i]);
                return EXIT_USAGE;
            }
    /* The merge is written, plotted and paged under the output
     * directory's lock, as a run's summary is (stale_reports.h): a run or
     * merge into the same directory waits instead of interleaving. */
    int lock = -1;
    if ((st = cli_make_dirs(operands[0])) || (st = out_dir_lock(operands[0], &lock)) ||
        (st = merge_run_dirs(operands[0], operands + 1, n - 1, strict, stdout, &unexpected))) {
        out_dir_unlock(lock);
        return cli_fail(st);
    }
    /* The merged report gets the plots a single run would (scripts and
     * gnuplot found as `plot` finds them); missing plots do not change the
     * verdicts, so they only warn. */
    char scripts_buf[4096];
    const char *scripts = cli_scripts_dir(scripts_buf, sizeof scripts_buf);
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    if (plot_run_dir(operands[0], scripts, gnuplot, stdout))
        fprintf(stderr, "ckpt-verify: warning: merged report has no plots: %s\n", error_message());
    cli_write_report_html(operands[0]);
    out_dir_unlock(lock);
    return unexpected ? EXIT_UNEXPECTED : 0;
}
