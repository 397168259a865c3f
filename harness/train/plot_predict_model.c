/* plot_predict_model: the memory plots' predicted curves from the harness's
 * own models (plot_internal.h, plot_predict_at): the training side's
 * definition, linked into the full ckpt-verify. */
#include <math.h>
#include <stdio.h>

#include "case_keys.h"
#include "case_policy.h"
#include "dtype.h"
#include "error.h"
#include "model.h"
#include "plot_internal.h"

/* Predicted bytes held at end of forward for d with `segments` (0 every,
 * SEGMENTS_NONE baseline) at `layers` and `seq`, checkpointed selectively
 * when `policy` is not ""; NAN when d names something this build does not
 * know. */
double plot_predict_at(const struct def *d, int layers, int segments, int seq, const char *policy)
{
    struct ckpt_case c;
    case_defaults(&c);
    int model = case_model_from_name(d->model), fusion = case_fusion_from_name(d->fusion);
    int autocast = case_autocast_from_name(d->autocast), dtype = dtype_from_name(d->dtype);
    if (model < 0 || fusion < 0 || autocast < 0 || dtype < 0)
        return NAN;
    c.model = (enum model_kind)model;
    c.fusion = (enum fusion_kind)fusion;
    c.autocast = (enum autocast_kind)autocast;
    c.dtype = dtype;
    c.layers = layers;
    c.hidden = d->hidden;
    c.seq = seq;
    c.batch = d->batch;
    c.heads = d->heads;
    c.dropout = d->dropout;
    snprintf(c.policy, sizeof c.policy, "%s", policy);
    struct model m;
    if (model_create(&m, &c, DEVICE_CPU) != ST_OK)
        return NAN;
    struct segment_plan plan;
    segment_plan_make(&plan, layers, segments);
    double bytes = (double)model_predict_saved_bytes_keeping(&m, &plan, policy_of_case(&c));
    model_free(&m);
    return bytes;
}

