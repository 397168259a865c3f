#include "user_memory.h"

#include <math.h>
#include <stdio.h>

static double attr(const struct run_record *r, const char *key)
{
    return run_record_attr(r, key);
}

enum user_memory_outcome user_memory_check(const struct run_record *base, const struct run_record *run, char *why,
                                           size_t why_len, char *where, size_t where_len)
{
    why[0] = where[0] = '\0';
    if (attr(run, "memory.control") == 1) {
        snprintf(why, why_len, "a plain control run (memory not judged)");
        return USER_MEMORY_UNJUDGED;
    }
    double stated = attr(run, "memory.stated_end_forward_bytes");
    if (isnan(stated))
        return USER_MEMORY_UNJUDGED;
    double held = attr(run, "memory.end_forward_bytes"), base_held = attr(base, "memory.end_forward_bytes");
    if (isnan(held) || isnan(base_held)) {
        snprintf(why, why_len, "held bytes not judged: %s records none at the end of forward",
                 isnan(held) ? run->name : base->name);
        return USER_MEMORY_UNJUDGED;
    }
    double margin = USER_HELD_MARGIN_FRACTION * base_held;
    double ops = attr(run, "memory.recomputed_ops"), kept = attr(run, "memory.kept_after_backward_bytes");
    if (ops == 0 && held >= base_held - margin) {
        snprintf(why, why_len,
                 "recomputes nothing: not a checkpoint (no op ran again in its backward, and it holds %.0f B at "
                 "the end of forward where %s holds %.0f B); a plain control run is marked Run(..., memory=None)",
                 held, base->name, base_held);
        snprintf(where, where_len, "/runs/%s/memory.recomputed_ops = 0", run->name);
        return USER_MEMORY_FAIL;
    }
    if (held > stated + margin) {
        snprintf(why, why_len,
                 "holds %.0f B at the end of forward, %.0f B more than the %.0f B its statement allows (margin "
                 "%.0f B, %.0f%% of %s's); still held: %s",
                 held, held - stated, stated, margin, 100 * USER_HELD_MARGIN_FRACTION, base->name,
                 run->memory_still_held[0] ? run->memory_still_held : "(no tensor the map can name)");
        snprintf(where, where_len, "/runs/%s/memory.end_forward_bytes = %.0f > stated %.0f: %.380s", run->name,
                 held, stated, run->memory_statement);
        return USER_MEMORY_FAIL;
    }
    if (!isnan(kept) && kept > margin) {
        snprintf(why, why_len, "keeps %.0f B of the activations it recomputed alive after backward, until the next "
                               "step (margin %.0f B): %s",
                 kept, margin, run->memory_kept[0] ? run->memory_kept : "(unnamed)");
        snprintf(where, where_len, "/runs/%s/memory.kept_after_backward_bytes = %.0f", run->name, kept);
        return USER_MEMORY_FAIL;
    }
    snprintf(why, why_len, "holds %.0f B at the end of forward, stated %.0f B (margin %.0f B)", held, stated,
             margin);
    return USER_MEMORY_OK;
}
