/* none: the baseline. The segment runs plainly; every saved tensor stays
 * on the tape until backward. */
#include "impl.h"

int impl_run_none(const struct checkpoint_impl *impl, const struct impl_options *opts,
                  const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    (void)impl;
    (void)opts;
    return segment_call(seg, in, out);
}
