/* progress: what a suite run tells the person or the CI log watching it,
 * on stderr so stdout keeps the full tables. On a terminal one status line
 * is redrawn: cases done / total, the current case, elapsed time and an
 * estimate of the time left (the mean case time so far times the cases
 * left), and the run of the case in progress. Off a terminal it is quiet, unless asked (--progress) for one
 * line per finished case, for CI logs:
 * "[3/30] gpt_none: reentrant PASS, nonreentrant PASS (0.04 s)". */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

#include "judge.h"

enum progress_mode {
    PROGRESS_QUIET,    /* off a terminal, by default */
    PROGRESS_LINES,    /* one line per finished case */
    PROGRESS_TERMINAL, /* one status line, redrawn */
};

struct progress {
    FILE *out;
    enum progress_mode mode;
    int total;
    double start; /* progress_now() at progress_init */
};

/* Monotonic seconds, for elapsed and per-case times. */
double progress_now(void);
void progress_init(struct progress *p, FILE *out, enum progress_mode mode, int total);
/* Case `index` (0-based) starts: redraws the terminal line. */
void progress_case_start(const struct progress *p, int index, const char *name);
/* Run `run` of case `index` starts (a case of a real-size model takes
 * minutes per run): redraws the terminal line as "case: run"; nothing in
 * the other modes. */
void progress_run_start(const struct progress *p, int index, const char *case_name, const char *run);
/* Case `index` finished after `seconds`: clears the terminal line, or
 * prints the case's line (PROGRESS_LINES). */
void progress_case_done(const struct progress *p, int index, const struct case_result *r, double seconds);

/* The texts, exposed for the tests. */
void progress_status_text(char *buf, size_t len, int index, int total, const char *name, double elapsed);
void progress_case_text(char *buf, size_t len, int index, int total, const struct case_result *r, double seconds);

#endif
