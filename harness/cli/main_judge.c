/* main_judge: the judge-only ckpt-verify (no libtorch): diff, merge,
 * judge, html and plot over reports any producer wrote. It is the command
 * the pip-installed package puts on PATH, and ckpt-verify-judge in a
 * project build. Anything else (running the harness's own cases, bench)
 * is refused in one line naming what to use. The only place that exits. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ckpt-verify diff [-t ULP] [-j] A.h5[:run] B.h5[:run]\n"
            "                                               compare two runs of any schema files\n"
            "       ckpt-verify merge [--strict] OUT_DIR DIR...  merge run directories (shards) into one report\n"
            "       ckpt-verify judge [-o DIR] FILE.h5...   verdicts from the runs stored in report files\n"
            "       ckpt-verify plot RUN_DIR                determinism, memory and time plots (gnuplot)\n"
            "       ckpt-verify html RUN_DIR                (re)write RUN_DIR/report.html, the run's page\n"
            "Every command answers --help; options and operands go in any order.\n"
            "\n"
            "This ckpt-verify is the judge alone: it links no libtorch and reads reports written by\n"
            "any producer (python -m ckpt_verify, verify() in your own environment, the harness).\n"
            "Running the harness's own cases (--case, --suite) and bench need a project build\n"
            "(the README's set-up).\n"
            "\n"
            "exit codes: 0 all verdicts expected, 1 an unexpected verdict (diff: a difference),\n"
            "            2 usage or input error, 3 internal error\n");
}

int main(int argc, char **argv)
{
    /* Past a file size limit (ulimit -f) a write fails with EFBIG and is
     * reported like a full disk, instead of the signal killing the run. */
    signal(SIGXFSZ, SIG_IGN);
    int code;
    if (cli_judge_side(argc, argv, &code))
        return code;
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("ckpt-verify %s (git %s), judge only: no libtorch\n", CKPT_VERSION, CKPT_GIT_REV);
        return 0;
    }
    char hint[160] = "";
    if (argc > 1)
        cli_subcommand_hint(hint, sizeof hint, argv[1]);
    fprintf(stderr, "ckpt-verify: %s%s%s: this ckpt-verify is the judge alone (diff, merge, judge, html, plot; "
                    "--help); running cases and bench need a project build (README)\n",
            argc > 1 ? "'" : "no command", argc > 1 ? argv[1] : "", argc > 1 ? "'" : "");
    if (hint[0])
        fprintf(stderr, "ckpt-verify: %s\n", hint + 1);
    return EXIT_USAGE;
}
