/* mutation_matrix: the compact overview of a planted-bug run — one row per
 * planted bug (impls/faulty/), one column per case, each cell the verdict
 * (FAIL / MEMF = caught, n/o = could not show there, PASS = missed) and a
 * `!` where the verdict is not the one the case expects. Read from the
 * run's summary records, so it covers every case of the run. */
#ifndef CKPT_MUTATION_MATRIX_H
#define CKPT_MUTATION_MATRIX_H

#include <stdio.h>

struct json_t;

/* Prints the matrix when planted bugs ran in more than one case; prints
 * nothing otherwise. `summary` is the root object of summary.json. */
void mutation_matrix_print(FILE *out, const struct json_t *summary);

#endif
