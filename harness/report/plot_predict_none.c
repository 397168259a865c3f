/* plot_predict_none: the torch-free judge's plot_predict_at
 * (plot_internal.h). It has no model to predict from: every definition is
 * one it does not know, and the memory plots draw their measurements
 * without a predicted curve. */
#include <math.h>

#include "plot_internal.h"

double plot_predict_at(const struct def *d, int layers, int segments, int seq, const char *policy)
{
    (void)d, (void)layers, (void)segments, (void)seq, (void)policy;
    return NAN;
}
