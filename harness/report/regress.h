/* regress: what got worse since a previous run. Compares two summaries
 * record by record (case × impl) and prints one line per finding.
 * Regressions (each makes the run exit 1):
 *   - the verdict got worse in the order PASS < NOISE < FAIL < MEMFAIL <
 *     ERROR. PASS -> NOISE counts only when the previous run of the case
 *     measured no noise at all (its kernels were deterministic and no longer
 *     are); where the baseline already differed from itself, landing on the
 *     baseline's exact bits or not is chance, and the line says "noise";
 *   - the verdict was expected and is not any more (a planted bug that
 *     stopped being caught: FAIL -> PASS);
 *   - the distance (max_scaled_ulp, in scaled ULP) grew in a run that
 *     PASSed and still does (a NOISE distance lies within the run's
 *     measured spread and varies run to run by nature; a FAIL's measures
 *     the bug);
 *   - memory saved (the peak's cut) or the held cut (bytes held at the end
 *     of forward) shrank by more than memory_points (fraction, 0.02);
 *   - a user's run held more above its memory statement, by more than
 *     REGRESS_STATEMENT_GAP_BYTES (the floor it is judged to);
 *   - overhead grew by more than overhead_ratio (0.10), judged per impl
 *     on the median over the cases of (new overhead / old overhead), using
 *     only runs whose gradients were right (PASS or NOISE) in both, and
 *     only with at least REGRESS_MIN_OVERHEAD_CASES of them: one case's
 *     millisecond steps swing by 2x between runs while that median moves
 *     a few percent.
 * New and removed records, improvements, changes to or from NOT_OBSERVABLE
 * and noise are listed, not counted; removed records in one line (how
 * many, of how many cases, the first three) unless list_removed. */
#ifndef CKPT_REGRESS_H
#define CKPT_REGRESS_H

#include <jansson.h>
#include <stdio.h>

#define REGRESS_MIN_OVERHEAD_CASES 5
#define REGRESS_STATEMENT_GAP_BYTES 8192.0 /* user_memory.h's floor */

struct regress_options {
    double memory_points;  /* 0.02: two percentage points */
    double overhead_ratio; /* 0.10: ten percent */
    int list_removed;      /* 1: a line per record not in this run; 0: one line for them all */
};

struct regress_counts {
    int regressions, improvements, noise, changed, added, removed, common;
};

void regress_default_options(struct regress_options *o);
/* Prints the findings to out under a header naming `prev_label`. When
 * `regressions` (a JSON array) is given, each regression is appended to it
 * as {"case", "impl", "finding", "against"} ("*" for an impl's overhead
 * over all cases): summary.json and junit.xml carry them, so a job that
 * exits 1 for a regression never reports green. */
int regress_compare(const json_t *prev, const json_t *cur, const char *prev_label, const struct regress_options *o,
                    FILE *out, struct regress_counts *counts, json_t *regressions);

#endif
