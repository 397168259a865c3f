/* stale_input: the reentrant checkpoint keeps only a reference to its input
 * for the recompute, and the input's buffer is then updated in place: once
 * the segment has run, the buffer is recycled for the segment's output (the
 * memory-saving reuse of an activation buffer that "nobody needs any more";
 * under autocast the bfloat16 output is cast into the float32 buffer). The
 * recompute in backward would then start from the segment's own output.
 * With several tensors in and out, the first output is written over the
 * first input.
 * Real failure: recomputing from a tensor modified in place after the
 * forward (in-place ops on a checkpoint's input, buffers reused by a memory
 * planner). PyTorch's reentrant checkpoint keeps its inputs through
 * save_for_backward, whose version counter turns this into an error at
 * backward; the harness's tape does the same.
 * Caught by: the tape's version check (tape_check_version) when backward
 * unpacks the checkpoint's saved input at step 1, before any gradient is
 * computed from it: a FAIL whose reason is "modified by an inplace
 * operation". Observable wherever a segment is checkpointed (the rule);
 * where no checkpoint input requires grad the reentrant checkpoint records
 * and saves nothing, so there is nothing to check: the run fails as the
 * reentrant reference does there (parameters left without gradients). */
#include <string.h>

#include "../../harness/error.h"
#include "faulty.h"

static int same_shape(const tensor *a, const tensor *b)
{
    int64_t sa[TENSOR_MAX_DIMS], sb[TENSOR_MAX_DIMS];
    int na = tensor_shape(a, sa), nb = tensor_shape(b, sb);
    return na == nb && memcmp(sa, sb, (size_t)na * sizeof sa[0]) == 0 && tensor_device(a) == tensor_device(b);
}

static int run_stale_input(const struct checkpoint_impl *impl, const struct impl_options *opts,
                           const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    struct var *fresh[REGION_MAX_TENSORS] = {0};
    int n_out = segment_n_out(seg);
    int st = impl_run_reentrant(impl, opts, seg, in, fresh);
    if (st)
        return st;
    for (int k = 1; k < n_out; k++)
        out[k] = fresh[k];
    /* Every harness model maps [batch, seq, hidden] to the same shape; a
     * segment that does not fits no reuse and is left alone. */
    if (!same_shape(in[0]->data, fresh[0]->data)) {
        out[0] = fresh[0];
        return ST_OK;
    }
    /* The output is written over the input's buffer (which the checkpoint's
     * saved input shares), cast if autocast made it another dtype. */
    if ((st = tensor_copy_(in[0]->data, fresh[0]->data))) {
        region_release(fresh, n_out);
        for (int k = 1; k < n_out; k++)
            out[k] = NULL;
        return st;
    }
    if (tensor_dtype(in[0]->data) != tensor_dtype(fresh[0]->data) || !tensor_is_contiguous(in[0]->data)) {
        out[0] = fresh[0];
        return ST_OK;
    }
    /* Same dtype: the buffer is handed out as the output and the output's
     * own buffer is dropped — the memory the reuse was meant to save. */
    tensor *buf = NULL;
    if (!(st = tensor_share(&buf, in[0]->data)))
        st = var_from_op(&out[0], buf, fresh[0]->grad_fn, fresh[0]->output_nr);
    var_release(fresh[0]);
    if (st)
        region_release(out + 1, n_out - 1);
    return st;
}

const struct checkpoint_impl impl_stale_input = {
    .name = "stale_input",
    .summary = "planted bug: reentrant, input buffer reused in place after forward; recompute reads it",
    .run = run_stale_input,
    .observable = faulty_has_checkpoints,
};
