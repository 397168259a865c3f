/* progress: what a suite run tells the person or the CI log watching it,
 * on stderr so stdout keeps the full tables. On a terminal one status line
 * is redrawn: cases done / total, the current case, elapsed time and an
 * estimate of the time left (the mean case time so far times the cases
 * left). Off a terminal nothing is redrawn; each finished case prints one
 * line: "[3/30] gpt_none: reentrant PASS, nonreentrant PASS (0.04 s)". */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

#include "runner.h"

struct progress {
    FILE *out;
    int tty;      /* redraw one line (terminal) or print a line per case */
    int total;
    double start; /* progress_now() at progress_init */
};

/* Monotonic seconds, for elapsed and per-case times. */
double progress_now(void);
void progress_init(struct progress *p, FILE *out, int tty, int total);
/* Case `index` (0-based) starts: redraws the terminal line. */
void progress_case_start(const struct progress *p, int index, const char *name);
/* Case `index` finished after `seconds`: clears the terminal line, or
 * prints the case's line. */
void progress_case_done(const struct progress *p, int index, const struct case_result *r, double seconds);

/* The texts, exposed for the tests. */
void progress_status_text(char *buf, size_t len, int index, int total, const char *name, double elapsed);
void progress_case_text(char *buf, size_t len, int index, int total, const struct case_result *r, double seconds);

#endif
