/* hook_fires_twice: a reentrant checkpoint whose nested backward runs as two
 * passes — retaining the recompute graph after the first — each over half
 * the upstream gradient, as an implementation does that backwards each of
 * a segment's outputs on its own (here the one output is taken as two
 * halves of itself). The halves sum to the same bits (halving is exact),
 * but every parameter inside the segment accumulates twice in one backward.
 * Real failure: DDP registers a hook per parameter and expects it to fire
 * once per backward ("Expected to mark a variable ready only once",
 * PyTorch #24005; #81296): reentrant checkpointing whose inner backward
 * runs more than once per outer backward fires the hook of each parameter
 * inside the segment twice, and the reducer fails or reduces twice.
 * Caught by: the gradient-hook count (each parameter's hook fires once per
 * backward call, harness/judge/run_checks.c) at step 1, where the
 * gradients alone are bitwise right; with `backward = twice` the second
 * call also rounds differently (grad + g/2 + g/2). */
#include <stdio.h>

#include "faulty.h"

/* The nested backward as two passes over halves of the upstream
 * gradients, the first retaining the recompute graph. Halving is exact, so
 * the gradients sum to the same bits where nothing accumulated before;
 * every parameter of the segment accumulates twice. */
static int nested_backward_per_half(struct var *const *roots, tensor *const *grads, int n)
{
    tensor *half[REGION_MAX_TENSORS] = {0};
    int st = ST_OK;
    for (int i = 0; i < n && !st; i++)
        st = tensor_mul_scalar(&half[i], grads[i], 0.5);
    struct backward_options retain = {.retain_graph = 1};
    if (!st)
        st = tape_backward_with(roots, half, n, &retain);
    if (!st)
        st = tape_backward(roots, half, n);
    for (int i = 0; i < n; i++)
        tensor_free(half[i]);
    return st;
}

static const struct checkpoint_services hook_fires_twice_services = {.nested_backward = nested_backward_per_half};

static int hook_fires_twice_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (!c->input_requires_grad) {
        snprintf(why, len, "input_requires_grad = false: a reentrant checkpoint on the input records no "
                           "backward to split");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_hook_fires_twice = {
    .name = "hook_fires_twice",
    .summary = "planted bug: reentrant, nested backward in two passes (each parameter's hook fires twice)",
    .run = impl_run_reentrant,
    .services = &hook_fires_twice_services,
    .observable = hook_fires_twice_observable,
};
