#include "user_memory.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* An attribute of the run as a whole (prefix "") or of one rank ("ranks/<r>/"). */
static double attr_at(const struct run_record *r, const char *prefix, const char *key)
{
    char full[RUN_ATTR_KEY_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, key);
    return run_record_attr(r, full);
}

/* attr_at, or `otherwise` where the run does not record it (a report
 * written before the per-step findings). */
static double attr_or(const struct run_record *r, const char *prefix, const char *key, double otherwise)
{
    double v = attr_at(r, prefix, key);
    return isnan(v) ? otherwise : v;
}

static const char *named(const struct text *text, const char *none)
{
    return text_len(text) ? text_str(text) : none;
}

/* The findings on one process's figures; who: "" or "rank 1 ". */
static enum user_memory_outcome check_at(const struct run_record *base, const struct run_record *run,
                                         const char *prefix, const char *who, struct text *why,
                                         struct text *where)
{
    double stated = attr_at(run, prefix, "memory.stated_end_forward_bytes");
    if (isnan(stated)) {
        if (strncmp(text_str(&run->memory_statement), USER_MEMORY_NOT_JUDGED, strlen(USER_MEMORY_NOT_JUDGED)) == 0)
            text_setf(why, "memory %s", text_str(&run->memory_statement));
        return USER_MEMORY_UNJUDGED;
    }
    /* The judged step's figures (the first step with a finding, else the
     * one closest to its statement); step 1's in an older report. */
    double held = attr_or(run, prefix, "memory.judged_held_bytes", attr_at(run, prefix, "memory.end_forward_bytes"));
    double base_held = attr_or(run, prefix, "memory.judged_baseline_held_bytes",
                               attr_at(base, prefix, "memory.end_forward_bytes"));
    if (isnan(held) || isnan(base_held)) {
        text_setf(why, "memory not judged: %s%s records no bytes held at the end of forward", who,
                 isnan(held) ? run->name : base->name);
        return USER_MEMORY_UNJUDGED;
    }
    if (stated < 0) {
        /* No correct run holds fewer than zero bytes: the baseline's reading
         * fell short of what its own map found alive (a free from another
         * thread landing inside its forward); a MEMFAIL on it would be false. */
        text_setf(why,
                  "memory not judged: %sthe statement comes to %.0f B, below zero (%s read %.0f B at the end of "
                 "forward, less than the activations its own map holds there): the baseline's reading is short",
                 who, stated, base->name, base_held);
        return USER_MEMORY_UNJUDGED;
    }
    double floor = attr_or(run, prefix, "memory.floor_bytes", USER_MEMORY_FLOOR_BYTES);
    int step = (int)attr_or(run, prefix, "memory.judged_step", 1);
    int steps = (int)attr_or(run, prefix, "memory.steps_judged", 1);
    double saving = attr_or(run, prefix, "memory.max_saving_bytes", base_held - held);
    double ops = attr_or(run, prefix, "memory.recomputed_ops", 0);
    double extra = attr_or(run, prefix, "memory.extra_bytes", 0);
    double kept = attr_at(run, prefix, "memory.kept_after_backward_bytes");
    /* A baseline that holds no more than twice the floor leaves no saving
     * a checkpoint could show above it (an RNG stash alone is 5056 B):
     * there bytes cannot tell a checkpoint from none, and the run says so. */
    double base_max = attr_or(run, prefix, "memory.max_baseline_held_bytes", base_held);
    int too_small = base_max <= USER_MEMORY_TOO_SMALL_FLOORS * floor;
    if (saving <= floor && !too_small) {
        /* Judged on bytes, whatever it re-runs: a policy that saves every
         * op, a region whose recompute frees nothing, a kept graph. */
        text_setf(why,
                         "%ssaves nothing: on none of its %d step(s) does it hold at the end of forward more than "
                         "the %.0f B floor less than %s (at most %.0f B less), though its backward re-ran %.0f "
                         "op(s); a plain control run is marked Run(..., memory=None)",
                         who, steps, floor, base->name, saving, ops);
        if (text_len(&run->memory_declared))
            text_appendf(why, "; its policy declares saved %s", text_str(&run->memory_declared));
        if (text_len(&run->memory_extra))
            text_appendf(why, "; extras: %s", text_str(&run->memory_extra));
        if (text_len(&run->memory_still_held))
            text_appendf(why, "; still held though recomputed: %s", text_str(&run->memory_still_held));
        text_setf(where, "/runs/%s/%smemory.max_saving_bytes = %.0f <= floor %.0f", run->name, prefix,
                 saving, floor);
        return USER_MEMORY_FAIL;
    }
    /* Extras are MEMFAIL when they are held on top of the statement. A
     * copy that stands in for what the statement counts (DeepSpeed's
     * partition_activations on one rank keeps a copy of each region's input
     * in place of the input itself) leaves the total within the floor of
     * the statement: named in the PASS below, not a finding. */
    if (extra > floor && held > stated + floor) {
        text_setf(why,
                 "%sstep %d: holds %.0f B at the end of forward in tensors born in its forward that %s does not "
                 "hold and nothing declares (floor %.0f B): %s",
                 who, step, extra, base->name, floor, named(&run->memory_extra, "(unnamed)"));
        text_setf(where, "/runs/%s/%smemory.extra_bytes = %.0f (step %d)", run->name, prefix, extra,
                 step);
        return USER_MEMORY_FAIL;
    }
    if (held > stated + floor) {
        text_setf(why,
                 "%sstep %d: holds %.0f B at the end of forward, %.0f B more than the %.0f B its statement allows "
                 "(floor %.0f B); still held: %s",
                 who, step, held, held - stated, stated, floor,
                 named(&run->memory_still_held, "(no tensor the map can name)"));
        text_setf(where, "/runs/%s/%smemory.judged_held_bytes = %.0f > stated %.0f: %s", run->name, prefix, held,
                  stated, text_str(&run->memory_statement));
        return USER_MEMORY_FAIL;
    }
    if (!isnan(kept) && kept > floor) {
        text_setf(why, "%sstep %d: keeps %.0f B born in that step alive after backward, into the next "
                               "step (floor %.0f B): %s",
                 who, step, kept, floor, named(&run->memory_kept, "(unnamed)"));
        text_setf(where, "/runs/%s/%smemory.kept_after_backward_bytes = %.0f (step %d)", run->name, prefix,
                 kept, step);
        return USER_MEMORY_FAIL;
    }
    text_setf(why,
                     "%sholds %.0f B at the end of forward on step %d of %d, stated %.0f B (floor %.0f B)", who, held,
                     step, steps, stated, floor);
    /* A PASS that holds more than stated says how much and what. */
    if (held > stated)
        text_appendf(why, ", %.0f B above its statement: %s", held - stated,
                     text_len(&run->memory_extra) ? text_str(&run->memory_extra)
                                                  : named(&run->memory_still_held, "no tensor the map can name"));
    else if (extra > floor)
        text_appendf(why, "; %.0f B of tensors born in its forward stand in for what the statement counts: %s",
                     extra, named(&run->memory_extra, "(unnamed)"));
    if (saving <= floor && too_small)
        text_appendf(why,
                 "; too small to tell by bytes whether it saves anything (its baseline holds at most %.0f B, "
                 "at most %.0f times the floor)", base_max, USER_MEMORY_TOO_SMALL_FLOORS);
    return USER_MEMORY_OK;
}

enum user_memory_outcome user_memory_check(const struct run_record *base, const struct run_record *run,
                                           struct text *why, struct text *where)
{
    text_clear(why);
    text_clear(where);
    if (run_record_attr(run, "memory.control") == 1) {
        text_set(why, "a plain control run (memory not judged)");
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
        struct text one = {0}, at = {0};
        enum user_memory_outcome o = check_at(base, run, prefix, who, &one, &at);
        if (o == USER_MEMORY_FAIL) {
            text_set(why, text_str(&one));
            text_set(where, text_str(&at));
        } else if (o == USER_MEMORY_OK || (worst == USER_MEMORY_UNJUDGED && text_len(&one))) {
            worst = o;
            text_set(why, text_str(&one));
        }
        why->failed |= one.failed;
        where->failed |= at.failed;
        text_free(&one);
        text_free(&at);
        if (o == USER_MEMORY_FAIL)
            return o;
    }
    if (worst != USER_MEMORY_UNJUDGED || text_len(why))
        return worst;
    return check_at(base, run, "", "", why, where);
}
