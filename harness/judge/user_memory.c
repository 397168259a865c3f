#include "user_memory.h"

#include <math.h>
#include <stdio.h>

/* An attribute of the run as a whole (prefix "") or of one rank ("ranks/<r>/"). */
static double attr_at(const struct run_record *r, const char *prefix, const char *key)
{
    char full[RUN_ATTR_KEY_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, key);
    return run_record_attr(r, full);
}

/* The three findings on one process's figures; who: "" or "rank 1: ". */
static enum user_memory_outcome check_at(const struct run_record *base, const struct run_record *run,
                                         const char *prefix, const char *who, char *why, size_t why_len,
                                         char *where, size_t where_len)
{
    double stated = attr_at(run, prefix, "memory.stated_end_forward_bytes");
    if (isnan(stated))
        return USER_MEMORY_UNJUDGED;
    double held = attr_at(run, prefix, "memory.end_forward_bytes");
    double base_held = attr_at(base, prefix, "memory.end_forward_bytes");
    if (isnan(held) || isnan(base_held)) {
        snprintf(why, why_len, "held bytes not judged: %s%s records none at the end of forward", who,
                 isnan(held) ? run->name : base->name);
        return USER_MEMORY_UNJUDGED;
    }
    if (stated < 0) {
        /* No correct run holds fewer than zero bytes: the baseline's reading
         * fell short of what its own map found alive (a free from another
         * thread landing inside its forward); a MEMFAIL on it would be false. */
        snprintf(why, why_len,
                 "held bytes not judged: %sthe statement comes to %.0f B, below zero (%s read %.0f B at the end of "
                 "forward, less than the activations its own map holds there): the baseline's reading is short",
                 who, stated, base->name, base_held);
        return USER_MEMORY_UNJUDGED;
    }
    double margin = USER_HELD_MARGIN_FRACTION * base_held;
    double ops = attr_at(run, prefix, "memory.recomputed_ops");
    double kept = attr_at(run, prefix, "memory.kept_after_backward_bytes");
    if (ops == 0 && held >= base_held - margin) {
        snprintf(why, why_len,
                 "%srecomputes nothing: not a checkpoint (no op ran again in its backward, and it holds %.0f B at "
                 "the end of forward where %s holds %.0f B); a plain control run is marked Run(..., memory=None)",
                 who, held, base->name, base_held);
        snprintf(where, where_len, "/runs/%s/%smemory.recomputed_ops = 0", run->name, prefix);
        return USER_MEMORY_FAIL;
    }
    if (held > stated + margin) {
        snprintf(why, why_len,
                 "%sholds %.0f B at the end of forward, %.0f B more than the %.0f B its statement allows (margin "
                 "%.0f B, %.0f%% of %s's); still held: %s",
                 who, held, held - stated, stated, margin, 100 * USER_HELD_MARGIN_FRACTION, base->name,
                 run->memory_still_held[0] ? run->memory_still_held : "(no tensor the map can name)");
        snprintf(where, where_len, "/runs/%s/%smemory.end_forward_bytes = %.0f > stated %.0f: %.360s", run->name,
                 prefix, held, stated, run->memory_statement);
        return USER_MEMORY_FAIL;
    }
    if (!isnan(kept) && kept > margin) {
        snprintf(why, why_len, "%skeeps %.0f B of the activations it recomputed alive after backward, until the "
                               "next step (margin %.0f B): %s",
                 who, kept, margin, run->memory_kept[0] ? run->memory_kept : "(unnamed)");
        snprintf(where, where_len, "/runs/%s/%smemory.kept_after_backward_bytes = %.0f", run->name, prefix, kept);
        return USER_MEMORY_FAIL;
    }
    snprintf(why, why_len, "%sholds %.0f B at the end of forward, stated %.0f B (margin %.0f B)", who, held, stated,
             margin);
    return USER_MEMORY_OK;
}

enum user_memory_outcome user_memory_check(const struct run_record *base, const struct run_record *run, char *why,
                                           size_t why_len, char *where, size_t where_len)
{
    why[0] = where[0] = '\0';
    if (run_record_attr(run, "memory.control") == 1) {
        snprintf(why, why_len, "a plain control run (memory not judged)");
        return USER_MEMORY_UNJUDGED;
    }
    /* A distributed run: each rank against the same rank of its baseline. */
    enum user_memory_outcome worst = USER_MEMORY_UNJUDGED;
    for (int rank = 0; rank < 4096; rank++) {
        char prefix[32], who[32];
        snprintf(prefix, sizeof prefix, "ranks/%d/", rank);
        if (isnan(attr_at(run, prefix, "memory.stated_end_forward_bytes")))
            break;
        snprintf(who, sizeof who, "rank %d ", rank);
        char one[512], at[512];
        one[0] = at[0] = '\0';
        enum user_memory_outcome o = check_at(base, run, prefix, who, one, sizeof one, at, sizeof at);
        if (o == USER_MEMORY_FAIL) {
            snprintf(why, why_len, "%s", one);
            snprintf(where, where_len, "%s", at);
            return o;
        }
        if (o == USER_MEMORY_OK || (worst == USER_MEMORY_UNJUDGED && one[0])) {
            worst = o;
            snprintf(why, why_len, "%s", one);
        }
    }
    if (worst != USER_MEMORY_UNJUDGED || why[0])
        return worst;
    return check_at(base, run, "", "", why, why_len, where, where_len);
}
