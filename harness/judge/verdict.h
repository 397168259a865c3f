/* verdict: what the judge says of one run, and the names reports and case
 * files spell verdicts with (PASS, NOISE, FAIL, MEMFAIL, ERROR,
 * NOT_OBSERVABLE). Ordered from best to worst. */
#ifndef CKPT_VERDICT_H
#define CKPT_VERDICT_H

/* Verdicts, ordered from best to worst (regression = a larger value). */
enum verdict { V_PASS = 0, V_NOISE, V_FAIL, V_MEMFAIL, V_ERROR, V_NOT_OBSERVABLE, V_COUNT };
const char *verdict_name(enum verdict v);
int verdict_from_name(const char *name); /* -1 if unknown */

#endif
