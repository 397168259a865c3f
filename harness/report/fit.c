#include "fit.h"

#include <math.h>

double fit_loglog_slope(const double *x, const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i]) || isnan(y[i]) || x[i] <= 0 || y[i] <= 0)
            continue;
        double lx = log(x[i]), ly = log(y[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
        m++;
    }
    double den = m * sxx - sx * sx;
    if (m < 2 || den <= 1e-12 * (m * sxx))
        return NAN;
    return (m * sxy - sx * sy) / den;
}
