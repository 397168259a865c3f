/* segment: running a checkpoint's function, whichever shape it has (one
 * tensor in and out, or a region of several with a non-tensor argument),
 * so the impls handle both through one call. */
#include "../harness/error.h"
#include "impl.h"

void region_release(struct var **out, int n)
{
    for (int k = 0; k < n; k++) {
        var_release(out[k]);
        out[k] = NULL;
    }
}

int segment_call(const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    int n_out = segment_n_out(seg);
    if (segment_n_in(seg) > REGION_MAX_TENSORS || n_out > REGION_MAX_TENSORS)
        return error_set(ST_INTERNAL, "a region takes at most %d tensors in and %d out", REGION_MAX_TENSORS,
                         REGION_MAX_TENSORS);
    for (int k = 0; k < n_out; k++)
        out[k] = NULL;
    int st = seg->call_region ? seg->call_region(seg->ctx, in, &seg->arg, out) : seg->call(seg->ctx, in[0], &out[0]);
    if (st)
        region_release(out, n_out);
    return st;
}
