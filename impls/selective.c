/* selective: selective activation checkpointing, the third reference impl —
 * PyTorch's create_selective_checkpoint_contexts with a MUST_SAVE /
 * PREFER_RECOMPUTE policy, Megatron's selective recompute. Non-reentrant
 * semantics (saved-tensor hooks; RNG and autocast replayed under a forked
 * RNG; works when no input requires grad) with a per-op policy, the case
 * key `policy` (harness/cases/policy.h):
 *   - the saved tensors of the ops the policy names are cached in forward
 *     and handed back as they are — matched by invocation order (op, which
 *     call of it in the checkpoint, which of its saved tensors) and checked:
 *     the same metadata, and the storage's version counter unchanged (an
 *     in-place op after forward is an error, as PyTorch's saved-tensor
 *     version check);
 *   - every other op's saved tensors are recomputed on the first unpack of
 *     one of them, once per backward, the recompute stopping after the last
 *     handle it must fill.
 * The recompute reruns the whole segment (the harness's ops are called
 * directly, there is no dispatcher to skip the cached ones), so RNG draws
 * line up with forward's. The mechanism is nonreentrant.c's frame. */
#include "impl.h"

int impl_run_selective(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    return impl_run_nonreentrant_keeping(impl, opts, seg, in, out, opts->policy);
}
