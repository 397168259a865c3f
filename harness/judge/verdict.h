/* verdict: what the judge says of one run, and the names reports and case
 * files spell verdicts with (PASS, NOISE, FAIL, MEMFAIL, ERROR,
 * NOT_OBSERVABLE). Ordered from best to worst. */
#ifndef CKPT_VERDICT_H
#define CKPT_VERDICT_H

#include <stddef.h>

/* Verdicts, ordered from best to worst (regression = a larger value). */
enum verdict { V_PASS = 0, V_NOISE, V_FAIL, V_MEMFAIL, V_ERROR, V_NOT_OBSERVABLE, V_COUNT };
const char *verdict_name(enum verdict v);
int verdict_from_name(const char *name); /* -1 if unknown */
/* "PASS|NOISE": the verdicts of a mask (bit 1u << verdict each), joined by
 * '|' in verdict order, into buf; "" for an empty mask. */
const char *verdict_mask_text(unsigned mask, char *buf, size_t len);

#endif
