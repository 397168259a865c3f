/* merge: `ckpt-verify merge OUT_DIR DIR...` merges run directories (the
 * shards of one run) into one report, with its plots. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli.h"
#include "error.h"
#include "merge.h"
#include "plot.h"

int cli_merge(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt-verify merge OUT_DIR DIR...\n");
        return EXIT_USAGE;
    }
    int st, unexpected = 0;
    /* The output would overwrite that input's summary.json with the merge. */
    struct stat out_sb, in_sb;
    if (stat(argv[1], &out_sb) == 0)
        for (int i = 2; i < argc; i++)
            if (stat(argv[i], &in_sb) == 0 && in_sb.st_dev == out_sb.st_dev && in_sb.st_ino == out_sb.st_ino) {
                fprintf(stderr, "ckpt-verify: merge: output directory %s is also an input (%s)\n", argv[1], argv[i]);
                return EXIT_USAGE;
            }
    if ((st = cli_make_dirs(argv[1])) ||
        (st = merge_run_dirs(argv[1], (const char *const *)argv + 2, argc - 2, stdout, &unexpected)))
        return cli_fail(st);
    /* The merged report gets the plots a single run would (scripts and
     * gnuplot found as `plot` finds them); missing plots do not change the
     * verdicts, so they only warn. */
    const char *scripts = getenv("CKPT_SCRIPTS_DIR") ? getenv("CKPT_SCRIPTS_DIR") : CKPT_SOURCE_DIR "/scripts";
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    if (plot_run_dir(argv[1], scripts, gnuplot, stdout))
        fprintf(stderr, "ckpt-verify: warning: merged report has no plots: %s\n", error_message());
    return unexpected ? EXIT_UNEXPECTED : 0;
}
