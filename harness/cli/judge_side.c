/* judge_side: the subcommands that read reports and write verdicts, plots
 * and pages (diff, merge, judge, html, plot). Torch-free: both the full
 * ckpt-verify (main.c) and the judge-only one (main_judge.c) dispatch here
 * first. */
#include <string.h>

#include "cli.h"

int cli_judge_side(int argc, char **argv, int *exit_code)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {{"diff", cli_diff}, {"plot", cli_plot}, {"merge", cli_merge}, {"judge", cli_judge}, {"html", cli_html}};
    if (argc < 2)
        return 0;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            *exit_code = commands[i].run(argc - 1, argv + 1);
            return 1;
        }
    return 0;
}
