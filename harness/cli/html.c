/* html: `ckpt-verify html RUN_DIR` (re)writes RUN_DIR/report.html, the page
 * people open, for any run directory, older ones included; and the one
 * call every command that writes a summary makes to write it too. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "error.h"
#include "html.h"

/* Plots as `plot` draws them: scripts from CKPT_SCRIPTS_DIR, else the
 * source tree's; gnuplot from CKPT_GNUPLOT, else PATH. CKPT_GNUPLOT=none
 * switches them off (a run in a loop need not spend gnuplot's time on a
 * page nobody opens); the page says so. */
static int write_page(const char *dir)
{
    char scripts_buf[4096];
    const char *scripts = cli_scripts_dir(scripts_buf, sizeof scripts_buf);
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    return html_write_run_dir(dir, scripts, strcmp(gnuplot, "none") ? gnuplot : NULL);
}

/* The page is how people read the run, not what decides it: a page that
 * cannot be written is a warning beside the summary that was. */
void cli_write_report_html(const char *dir)
{
    if (write_page(dir)) {
        fprintf(stderr, "ckpt-verify: warning: %s/report.html not written: %s\n", dir, error_message());
        error_clear();
    }
}

int cli_html(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    static const char usage[] = "usage: ckpt-verify html RUN_DIR   (RUN_DIR holds summary.json; writes "
                                "RUN_DIR/report.html)\n";
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (opt != 'h')
            return cli_option_error("html", opt, argv[optind - 1], options);
        printf("%sWrites one self-contained page from RUN_DIR/summary.json: the run's facts, the verdict counts,\n"
               "the verdict table (sortable and filterable in a browser), a section per case and the plots\n"
               "inlined as SVG (gnuplot: CKPT_GNUPLOT, else PATH; without it the page says why they are absent;\n"
               "CKPT_GNUPLOT=none switches them off).\n"
               "No network, no external file; readable with scripts off. Runs, judge --out and merge write it\n"
               "too; this command rewrites it for any run directory, older ones included.\n"
               "exit codes: 0 written, 2 RUN_DIR is no run directory or the page cannot be written\n",
               usage);
        return 0;
    }
    if (argc - optind != 1) {
        fprintf(stderr, "%s", usage);
        return EXIT_USAGE;
    }
    const char *dir = argv[optind];
    struct stat sb;
    char summary[1100];
    snprintf(summary, sizeof summary, "%s/summary.json", dir);
    int st;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        st = error_set(ST_INPUT, "html: %s: not a run directory (no such directory)", dir);
    else if (stat(summary, &sb) != 0)
        st = error_set(ST_INPUT, "html: %s: not a run directory (no summary.json)", dir);
    else if (!S_ISREG(sb.st_mode))
        st = error_set(ST_INPUT, "%s: not a regular file, not a summary", summary);
    else
        st = write_page(dir);
    if (st)
        return cli_fail(st);
    printf("%s/report.html\n", dir);
    return 0;
}
