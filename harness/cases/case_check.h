/* case_check: the checks of a case's keys against each other (a single
 * key's range is checked when it is set, case_keys.c): a model's limits,
 * segments within layers, a policy that fits its impls and model, expect
 * naming only impls the case runs. Internal to the case loader. */
#ifndef CKPT_CASE_CHECK_H
#define CKPT_CASE_CHECK_H

#include "case_keys.h"

/* ST_INPUT naming path and the line that set the last of the conflicting
 * keys (section_line when the defaults set them all). */
int case_check_keys(const struct case_builder *b, const char *path, int section_line);

#endif
