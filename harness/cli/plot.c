/* plot: `ckpt-verify plot RUN_DIR` draws a run's determinism, memory and
 * time plots with gnuplot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "error.h"
#include "plot.h"

/* plot RUN_DIR: the scripts come from CKPT_SCRIPTS_DIR, else the source
 * tree's scripts/; gnuplot from CKPT_GNUPLOT, else PATH. */
int cli_plot(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: ckpt-verify plot RUN_DIR   (RUN_DIR holds summary.json; plots go to RUN_DIR/plots)\n");
        return argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : EXIT_USAGE;
    }
    const char *scripts = getenv("CKPT_SCRIPTS_DIR") ? getenv("CKPT_SCRIPTS_DIR") : CKPT_SOURCE_DIR "/scripts";
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    /* A FIFO in the summary's place would block the plot for ever. */
    char summary[1100];
    struct stat sb;
    snprintf(summary, sizeof summary, "%s/summary.json", argv[1]);
    int st = stat(summary, &sb) == 0 && !S_ISREG(sb.st_mode)
                 ? error_set(ST_INPUT, "%s: not a regular file, not a summary", summary)
                 : plot_run_dir(argv[1], scripts, gnuplot, stdout);
    return st ? cli_fail(st) : 0;
}
