/* user_memory: a user's run judged against the memory findings its
 * producer drew, step by step, from the plain baseline's memory map, the
 * run's declared policy and its own recompute (docs/memory.md, "A user's
 * checkpoint"): on some step it saves more than the floor, and on every
 * step it holds no tensor born in its forward that the baseline does not
 * hold and nothing declares (an extra), no more than its statement, and
 * nothing of the step alive into the next, each beyond an absolute floor
 * for allocator bookkeeping. A run without a statement is not judged here. */
#ifndef CKPT_USER_MEMORY_H
#define CKPT_USER_MEMORY_H

#include <stddef.h>

#include "run_record.h"

/* The floor, in bytes, when a run records none (memory.floor_bytes):
 * room for allocator bookkeeping on the CPU, never a fraction of the
 * baseline (docs/memory.md, "The floor", has the measured residues). */
#define USER_MEMORY_FLOOR_BYTES 8192.0

/* "Saves nothing" is judged only where the baseline holds more than this
 * many floors at the end of forward on some step: below, no checkpoint's
 * saving could show above the floor. */
#define USER_MEMORY_TOO_SMALL_FLOORS 2.0

/* What a run's memory.statement says when its producer could not judge
 * it: the rest of the text is why (no meter, no map). */
#define USER_MEMORY_NOT_JUDGED "not judged: "

enum user_memory_outcome {
    USER_MEMORY_UNJUDGED, /* no statement (or a control run): why says which, or is "" */
    USER_MEMORY_OK,       /* within the statement: why says by how much */
    USER_MEMORY_FAIL,     /* why says what is held, where names the attribute */
};

/* run against its statement; base is the baseline it is judged against.
 * why and where are set (emptied first), whole at any length. */
enum user_memory_outcome user_memory_check(const struct run_record *base, const struct run_record *run,
                                           struct text *why, struct text *where);

#endif
