/* case_fit: whether a case's tensors can fit the memory limit at all,
 * decided from its shapes before anything is allocated. What a run must
 * hold at once at the end of the baseline's forward (parameters, input,
 * target and the model's exact prediction of the saved activations) is
 * a lower bound on its need: past the limit, the case cannot run. */
#ifndef CKPT_CASE_FIT_H
#define CKPT_CASE_FIT_H

#include <stdint.h>

#include "case.h"

/* The bytes the case needs at least (its CPU tensors), or -1 when the
 * model cannot be laid out (the message is set). */
int64_t case_fit_min_bytes(const struct ckpt_case *c);
/* ST_INPUT in one line naming the case's file:line, what it needs and the
 * limit that applies (ckpt_counting_allocator_limit and its source) when a
 * CPU case cannot fit; ST_OK otherwise, and for cases on other devices. */
int case_fit_check(const struct ckpt_case *c);

/* The size of the case's report from its shapes: at least the initial
 * parameters and one run's tensors (each step's gradients, the final
 * parameters: every other run bitwise identical to baseline_0 is hard
 * links), at most that many bytes for every run. */
int case_fit_report_bytes(const struct ckpt_case *c, double *least, double *most);
/* ST_RUN in one line naming the case, both sizes and the room when even
 * the least report cannot fit the free space (or the file size limit)
 * under dir: the case is refused before it runs. */
int case_fit_check_disk(const struct ckpt_case *c, const char *dir);

#endif
