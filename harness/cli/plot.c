/* plot: `ckpt-verify plot RUN_DIR` draws a run's determinism, memory and
 * time plots with gnuplot. */
#include <getopt.h>
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
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    static const char usage[] = "usage: ckpt-verify plot RUN_DIR   (RUN_DIR holds summary.json; plots go to RUN_DIR/plots)\n";
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (opt != 'h')
            return cli_option_error("plot", opt, argv[optind - 1], options);
        printf("%sDraws the run's determinism, memory and time plots with gnuplot (CKPT_GNUPLOT, else PATH)\n"
               "from RUN_DIR/summary.json into RUN_DIR/plots.\n", usage);
        return 0;
    }
    if (argc - optind != 1) {
        fprintf(stderr, "%s", usage);
        return EXIT_USAGE;
    }
    argv += optind - 1;
    char scripts_buf[4096];
    const char *scripts = cli_scripts_dir(scripts_buf, sizeof scripts_buf);
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
