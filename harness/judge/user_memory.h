/* user_memory: a user's run judged against the memory statement its
 * producer drew from the plain baseline's memory map (docs/memory.md, "A
 * user's checkpoint"): it recomputes something, holds at the end of forward
 * no more than stated (within USER_HELD_MARGIN_FRACTION of baseline_0's
 * held bytes), and keeps none of the activations it recomputed once its
 * backward is done. A run without a statement is not judged here. */
#ifndef CKPT_USER_MEMORY_H
#define CKPT_USER_MEMORY_H

#include <stddef.h>

#include "run_record.h"

/* The margin over the statement, as a fraction of baseline_0's bytes held
 * at the end of forward: room for what a checkpoint keeps besides
 * activations (bounded staging buffers, bookkeeping tensors). The
 * statement itself was exact on every correct checkpoint measured
 * (docs/memory.md has the table). */
#define USER_HELD_MARGIN_FRACTION 0.05

enum user_memory_outcome {
    USER_MEMORY_UNJUDGED, /* no statement (or a control run): why says which, or is "" */
    USER_MEMORY_OK,       /* within the statement: why says by how much */
    USER_MEMORY_FAIL,     /* why says what is held, where names the attribute */
};

/* run against its statement; base is the baseline it is judged against. */
enum user_memory_outcome user_memory_check(const struct run_record *base, const struct run_record *run, char *why,
                                           size_t why_len, char *where, size_t where_len);

#endif
