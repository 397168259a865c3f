/* observable: the conditions the planted bugs share for being visible in a
 * case at all (see faulty.h). */
#include <stdio.h>

#include "faulty.h"

int faulty_has_checkpoints(const struct ckpt_case *c, char *why, size_t len)
{
    if (c->segments == 1) {
        snprintf(why, len, "segments = 1: no layer is checkpointed");
        return 0;
    }
    return 1;
}

int faulty_replays_rng(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (!c->preserve_rng_state) {
        snprintf(why, len, "preserve_rng_state = false: the reference does not replay RNG either");
        return 0;
    }
    if (c->dropout == 0 && c->model != MODEL_RRELU_MLP) {
        snprintf(why, len, "dropout = 0 and the model has no other random op: nothing to replay");
        return 0;
    }
    return 1;
}
