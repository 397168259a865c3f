/* text: a string on the heap with no bound, for what the judge composes and
 * reads (reasons, a run's messages and lists): set, append, prepend at any
 * length, nothing cut. A zeroed struct text is empty and reads as "". When
 * memory runs out the text keeps what it had, marks itself failed (sticky
 * until text_free) and the error slot says so; text_check reports it once
 * for a whole composition, so call sites need not check each step. */
#ifndef CKPT_TEXT_H
#define CKPT_TEXT_H

#include <stddef.h>

struct text {
    char *s;       /* NUL-terminated, or NULL while empty */
    size_t len, cap;
    int failed;    /* an allocation failed since the text was made */
};

/* "" when empty; valid until the text next changes. */
const char *text_str(const struct text *t);
size_t text_len(const struct text *t);
/* Each returns ST_OK, or ST_INTERNAL (error slot set, t->failed) when
 * memory ran out; `s` and the arguments may point into t itself. */
int text_set(struct text *t, const char *s);
int text_setf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int text_append(struct text *t, const char *s);
int text_appendf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int text_prepend(struct text *t, const char *s);
int text_prependf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties t (its buffer kept; failed kept). */
void text_clear(struct text *t);
/* ST_OK, or ST_INTERNAL naming `what` if any change to t ran out of memory. */
int text_check(const struct text *t, const char *what);
void text_free(struct text *t);

/* The allocator every text grows with (realloc semantics); NULL restores
 * realloc. For tests that inject allocation failures from outside. */
typedef void *(*text_realloc_fn)(void *ptr, size_t size);
void text_set_allocator(text_realloc_fn fn);

#endif
