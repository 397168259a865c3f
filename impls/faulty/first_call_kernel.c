/* first_call_kernel: the fused bias+GELU takes another path on its first call
 * than on later ones, so the forward (first call) and the recompute (a later
 * call) disagree in the last bits. Emulated per run — each run stands for a
 * fresh process: during the first checkpointed forward of a run, the first
 * fused bias+GELU output gets the lowest mantissa bit of every finite,
 * nonzero element flipped (a different rounding path), later calls, the
 * recompute included, are untouched. The baseline runs are warm throughout.
 * The flip is an ATen op on the output's device (tensor_flip_last_bit_), so
 * the bug shows on a GPU exactly as on the CPU.
 * Real failure: a fused kernel (TransformerEngine) that picks or tunes its
 * algorithm on first use; without a warm-up step the checkpoint's recompute
 * uses another reduction than the forward did.
 * Caught by: gradient comparison at step 1; with --verify-values the
 * non-reentrant value check names the first recomputed saved tensor that
 * depends on the fused output (the next linear's input), when that op is in
 * the same segment. Not observable with fusion none (no fused kernel). */
#include <stdio.h>
#include <string.h>

#include "../../harness/error.h"
#include "faulty.h"

struct first_call {
    struct op_observer previous;
    int done;
    int status; /* of the flip */
};

static void on_op(void *ctx, const char *op, struct var *const *inputs, int n_inputs, const struct var *output)
{
    struct first_call *fc = ctx;
    if (fc->previous.fn)
        fc->previous.fn(fc->previous.ctx, op, inputs, n_inputs, output);
    if (fc->done || strncmp(op, "bias_gelu_fused", strlen("bias_gelu_fused")) != 0)
        return;
    fc->done = 1;
    /* Through an ATen op on the output's own device, never its host bytes:
     * the bug must show on a GPU as on the CPU. An observer cannot return a
     * status; a failure is kept for the run to report. */
    fc->status = tensor_flip_last_bit_(output->data);
}

static int run_first_call_kernel(const struct checkpoint_impl *impl, const struct impl_options *opts,
                                 const struct segment_fn *seg, struct var *in, struct var **out)
{
    /* Only the run's first checkpointed forward is "cold". */
    if (!opts->stats || opts->stats->checkpoints > 0)
        return impl_run_nonreentrant(impl, opts, seg, in, out);
    struct first_call fc = {0};
    fc.previous = tape_set_op_observer((struct op_observer){on_op, &fc});
    int st = impl_run_nonreentrant(impl, opts, seg, in, out);
    tape_set_op_observer(fc.previous);
    if (!st && fc.status) {
        var_release(*out);
        *out = NULL;
        st = fc.status;
    }
    return st;
}

static int first_call_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (c->fusion == FUSION_NONE) {
        snprintf(why, len, "fusion none: no fused bias+GELU kernel runs");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_first_call_kernel = {
    .name = "first_call_kernel",
    .summary = "planted bug: non-reentrant, fused bias+GELU rounds differently on its first call of a run",
    .run = run_first_call_kernel,
    .observable = first_call_observable,
};
