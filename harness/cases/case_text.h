/* case_text: the text helpers the case loader reads and prints with:
 * trimmed spans of a longer string and the items of separated lists, the
 * word shapes names may take, whole-string numbers, the shortest exact
 * text of a double, and edit distance for "did you mean" suggestions. */
#ifndef CKPT_CASE_TEXT_H
#define CKPT_CASE_TEXT_H

#include <stddef.h>

/* A piece of a longer string (not NUL-terminated). */
struct span {
    const char *p;
    size_t n;
};

/* p[0..n) without leading and trailing blanks. */
struct span text_trim(const char *p, size_t n);
/* Where a list starts: NULL for a blank value, so that "" is the empty list
 * and not a list holding one empty item. */
const char *text_list_start(const char *value);
/* The next `sep`-separated item, trimmed; *cursor becomes NULL after the
 * last one. "a,,b" yields an empty middle item, which callers reject. */
int text_next_item(const char **cursor, char sep, struct span *item);
/* Copies a span into a NUL-terminated buffer; -1 if it does not fit. */
int text_span_copy(struct span s, char *dst, size_t cap);

/* Non-empty, letters and digits plus the characters in `extra`. */
int text_is_word(const char *s, const char *extra);
/* Case names become file names, CTest test names and HDF5 attributes, so
 * they keep to characters that need no quoting anywhere. */
int text_is_case_name(const char *s);
int text_is_impl_name(const char *s);
int text_is_label_name(const char *s);
int text_equals_ignoring_case(const char *a, const char *b);

/* Levenshtein distance; `b` is a known name (case or key) of fewer than
 * CASE_NAME_MAX characters (a longer one is very far). */
int text_edit_distance(const char *a, const char *b);
/* Close enough to suggest: a few edits, scaled with the length typed. */
int text_is_near_miss(const char *typed, int distance);

/* Up to n names (of count, name_at(ctx, i) each) near what was typed: a
 * near miss, or one that contains it ("bs1" finds every *_bs1); closest
 * first, then in order. Returns how many went to out. */
int text_suggest(const char *typed, const char *(*name_at)(const void *ctx, int i), const void *ctx, int count,
                 const char **out, int n);
/* " (did you mean: a, b?)" for n names, else `otherwise`, into buf. */
void text_format_suggestions(char *buf, size_t len, const char *const *near, int n, const char *otherwise);

/* Whole-string decimal integer in [min, max]: no '+', no blanks, no tail;
 * 0, or -1 (nothing stored). */
int text_parse_long(const char *s, long min, long max, long *out);
/* Whole-string finite number in [min, max]; 0, or -1. */
int text_parse_real(const char *s, double min, double max, double *out);
/* Shortest text that reads back as the same double ("0.01", not
 * "0.010000000000000000208"), so attributes stay readable and exact. */
void text_format_real(double x, char *buf, size_t n);
/* The index of name in a NULL-terminated table, or -1. */
int text_name_index(const char *const *names, const char *name);
/* Bytes in the largest binary unit that keeps them >= 1 ("64.0 GiB"). */
const char *text_format_bytes(double v, char *buf, size_t len);
/* Appends to a NUL-terminated buffer, truncating quietly (the buffers are
 * sized for the largest list a case can hold). */
void text_buf_append(char *buf, size_t n, const char *text);

#endif
