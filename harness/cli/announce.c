/* announce: the line a run or a benchmark prints before it computes (the
 * training side of the CLI): the libtorch and BLAS it computes with, and the
 * slow-BLAS warning. */
#include <stdio.h>

#include "aten/aten.h"
#include "blas_info.h"
#include "cli.h"

/* Runs and benchmarks compute: a slow BLAS gets its one-line warning, and
 * a terminal gets a header line naming what the run computes with. */
void cli_announce_blas(FILE *header)
{
    struct blas_info blas;
    blas_info_detect(&blas);
    if (blas_info_warning(&blas))
        fprintf(stderr, "ckpt-verify: %s\n", blas_info_warning(&blas));
    if (header)
        fprintf(header, "ckpt-verify %s (git %s), libtorch %s, BLAS %s\n", CKPT_VERSION, CKPT_GIT_REV,
                aten_libtorch_version(), blas.name);
}

