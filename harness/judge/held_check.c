#include "held_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double held_tolerance_bytes(const char *device, double predicted)
{
    if (device && strncmp(device, "cuda", 4) == 0)
        return HELD_TOLERANCE_CUDA_FRACTION * fabs(predicted);
    return HELD_TOLERANCE_CPU_BYTES;
}

enum held_outcome held_check_run(const struct run_record *run, const char *device, char *why, size_t len)
{
    double held = run_record_attr(run, "memory.end_forward_bytes");
    double predicted = run_record_attr(run, "memory.predicted_end_forward_bytes");
    if (isnan(predicted)) {
        snprintf(why, len, "held bytes not judged: %s records no prediction (another producer's run, or a model the "
                           "harness cannot predict)", run->name);
        return HELD_UNJUDGED;
    }
    if (isnan(held)) {
        snprintf(why, len, "held bytes not judged: %s records no bytes held at the end of forward", run->name);
        return HELD_UNJUDGED;
    }
    double gap = held - predicted, tolerance = held_tolerance_bytes(device, predicted);
    if (fabs(gap) <= tolerance) {
        snprintf(why, len, "%s holds %.0f bytes at the end of forward, as predicted (tolerance %.0f bytes)",
                 run->name, held, tolerance);
        return HELD_MATCHES;
    }
    double pct = predicted > 0 ? 100.0 * gap / predicted : INFINITY;
    if (gap > 0)
        snprintf(why, len,
                 "%s holds %.0f bytes at the end of forward, predicted %.0f: %.0f bytes (%+.1f%%) more, beyond the "
                 "tolerance of %.0f bytes on %s — something stays alive that should have been freed or recomputed",
                 run->name, held, predicted, gap, pct, tolerance, device && device[0] ? device : "cpu");
    else
        snprintf(why, len,
                 "%s holds %.0f bytes at the end of forward, predicted %.0f: %.0f bytes (%+.1f%%) fewer, beyond the "
                 "tolerance of %.0f bytes on %s — something backward needs was not kept",
                 run->name, held, predicted, -gap, pct, tolerance, device && device[0] ? device : "cpu");
    return HELD_OFF;
}
