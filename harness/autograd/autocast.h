/* autocast: the harness's autocast state and its casting rules, modelled
 * on PyTorch's CPU/CUDA autocast. While enabled, matmul-like ops (linear,
 * the attention products) run in the autocast dtype; layer norm, softmax
 * and the losses run in float32; pointwise ops run in their inputs' dtype.
 * The casts are recorded on the tape, so gradients flow back in each
 * input's own dtype. The state is global (documented in tape.h). */
#ifndef CKPT_AUTOCAST_H
#define CKPT_AUTOCAST_H

#include "dtype.h"

struct autocast_state {
    int enabled;
    enum dtype dtype; /* DT_BF16 or DT_F16 */
};

struct autocast_state autocast_get(void);
/* Sets the state and returns the previous one (restore it after). */
struct autocast_state autocast_set(struct autocast_state state);

enum autocast_rule { AUTOCAST_LOWER, AUTOCAST_FP32 };
/* The dtype an op of this rule casts a floating input of dtype `in` to
 * under the current state (in itself when autocast is off). */
enum dtype autocast_target(enum autocast_rule rule, enum dtype in);

#endif
