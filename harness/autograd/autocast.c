#include "autocast.h"

/* Global by design: see tape.h. */
static struct autocast_state autocast_current = {0, DT_BF16};

struct autocast_state autocast_get(void) { return autocast_current; }

struct autocast_state autocast_set(struct autocast_state state)
{
    struct autocast_state previous = autocast_current;
    autocast_current = state;
    return previous;
}

enum dtype autocast_target(enum autocast_rule rule, enum dtype in)
{
    if (!autocast_current.enabled || !dtype_is_float(in) || in == DT_F64)
        return in;
    return rule == AUTOCAST_LOWER ? autocast_current.dtype : DT_F32;
}
