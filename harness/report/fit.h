/* fit: the least-squares fit the benchmark and the plots share, so both
 * report the same exponent for the same points. */
#ifndef CKPT_FIT_H
#define CKPT_FIT_H

/* Slope k of the least-squares line through (log x, log y): y ~ x^k.
 * Points with x <= 0, y <= 0 or NaN are left out; NAN with fewer than two
 * distinct x. */
double fit_loglog_slope(const double *x, const double *y, int n);

#endif
