/* cli: what the ckpt-verify command's parts share (internal to harness/cli/).
 * Two mains: main.c (the full command) and main_judge.c (the judge alone,
 * no libtorch). Both dispatch to judge_side.c's subcommands, one per file:
 * diff.c, merge.c, judge.c, plot.c, html.c (torch-free, with common.c);
 * main.c also to the training side: run.c (the main run, flags and all),
 * bench.c, help.c (--help, --version) and announce.c.
 * Exit codes: 0 every verdict expected, 1 an unexpected verdict, a
 * regression or a difference (diff), 2 usage or input error, 3 internal
 * error. */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <stdint.h>
#include <stdio.h>

struct option; /* <getopt.h> */

#define EXIT_UNEXPECTED 1
#define EXIT_USAGE 2
#define EXIT_INTERNAL 3

/* The judge side's subcommands (judge_side.c): when argv[1] names one,
 * runs it, sets *exit_code and returns 1; returns 0 otherwise. */
int cli_judge_side(int argc, char **argv, int *exit_code);
/* The main run takes the command line whole; each subcommand takes argv
 * from its own name on (argv[0] = "diff", ...). They return the process's
 * exit code. */
int cli_run(int argc, char **argv);
int cli_diff(int argc, char **argv);
int cli_merge(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_judge(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_html(int argc, char **argv);
/* Writes DIR/report.html from DIR/summary.json (html.c); a failure is one
 * warning line on stderr, never the run's exit code. */
void cli_write_report_html(const char *dir);

/* --help and --version of the main command (help.c). */
void cli_usage(FILE *out);
void cli_print_version(FILE *out);

/* Prints the error's message and returns its exit code. */
int cli_fail(int code);
/* A bad option of `command` ("" for the main run) as getopt_long reported
 * it (opt ':' a missing value, else unknown; arg the word as typed): one
 * line on stderr; returns EXIT_USAGE. Every command takes options and
 * operands in any order (getopt_long permutes; "--" ends the options). */
int cli_option_error(const char *command, int opt, const char *arg, const struct option *options);
/* The long options of `options` nearest to an unknown one (`arg` as typed,
 * "--cas" or "--cas=x"): " (did you mean: --case, --cases?)", else
 * `otherwise`, into buf. */
void cli_option_hint(char *buf, size_t len, const char *arg, const struct option *options, const char *otherwise);
/* The subcommands (main.c) nearest to a word the main run took as an
 * operand ("jugde"): " (did you mean: judge?)" into buf, else "";
 * returns how many it named. */
int cli_subcommand_hint(char *buf, size_t len, const char *word);
/* Runs and benchmarks compute: a slow BLAS gets its one-line warning, and
 * `header`, when given, a line naming what the run computes with. */
void cli_announce_blas(FILE *header);
/* An output directory is refused before any work when it cannot be one:
 * too long to keep whole, or an existing non-directory. */
int cli_check_out_dir(const char *path);
/* Where the gnuplot scripts (plot_*.gp) are: $CKPT_SCRIPTS_DIR, else the
 * source tree's scripts/ (a project build), else share/ beside the binary
 * (an installed one: the pip wheel). Returns buf or a constant. */
const char *cli_scripts_dir(char *buf, size_t len);
/* Creates the output directory and its parents; it must be writable. */
int cli_make_dirs(const char *path);
/* What the runs read from files may load in all (common.c), and the limit
 * that sets it in words, for messages. */
struct read_budget {
    uint64_t bytes;
    char limit[160];
};
int cli_read_budget(struct read_budget *b);
/* ST_INPUT in one line ("WHAT: the datasets claim ..., more than <limit>;
 * nothing loaded") when `claimed` bytes pass the budget, before any load. */
int cli_check_claim(const struct read_budget *b, const char *what, uint64_t claimed);
/* The same for readers that hold `held` tensors at a time (stored runs:
 * judge, diff): the largest dataset, that many times, must fit. */
int cli_check_held(const struct read_budget *b, const char *what, uint64_t largest, int held);
/* For readers that load and free one tensor after another (judge, diff):
 * freed buffers stay in the heap for the next load instead of going back
 * to the kernel, which would zero fresh pages for every tensor again. */
void cli_keep_freed_memory(void);

#endif
