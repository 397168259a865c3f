/* text: unbounded heap strings (text.h). Formatted changes are formatted
 * into a buffer of their own first, so arguments may point into the text
 * they change. */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static text_realloc_fn grow_with = realloc;

void text_set_allocator(text_realloc_fn fn) { grow_with = fn ? fn : realloc; }

const char *text_str(const struct text *t) { return t->s ? t->s : ""; }

size_t text_len(const struct text *t) { return t->s ? t->len : 0; }

static int out_of_memory(struct text *t, size_t want)
{
    t->failed = 1;
    return error_set(ST_INTERNAL, "out of memory for a text of %zu bytes", want);
}

/* Room for `want` bytes of text and its NUL. */
static int reserve(struct text *t, size_t want)
{
    if (want < t->cap && t->s)
        return ST_OK;
    if (want >= ((size_t)-1) / 2)
        return out_of_memory(t, want);
    size_t cap = t->cap ? t->cap : 64;
    while (cap <= want)
        cap *= 2;
    char *s = grow_with(t->s, cap);
    if (!s)
        return out_of_memory(t, want);
    if (!t->s) {
        s[0] = '\0';
        t->len = 0;
    }
    t->s = s;
    t->cap = cap;
    return ST_OK;
}

/* Puts n bytes of s at offset `at` of t (0: in front, t->len: at the end). */
static int insert(struct text *t, size_t at, const char *s, size_t n)
{
    size_t offset = 0;
    int inside = t->s && s >= t->s && s < t->s + t->cap;
    if (inside)
        offset = (size_t)(s - t->s);
    int st = reserve(t, t->len + n);
    if (st)
        return st;
    if (inside)
        s = t->s + offset;
    if (inside && at < t->len) {
        /* Prepending part of itself: copy it out of the way first. */
        char *copy = grow_with(NULL, n + 1);
        if (!copy)
            return out_of_memory(t, t->len + n);
        memcpy(copy, s, n);
        memmove(t->s + at + n, t->s + at, t->len - at + 1);
        memcpy(t->s + at, copy, n);
        free(copy);
    } else {
        memmove(t->s + at + n, t->s + at, t->len - at + 1);
        memmove(t->s + at, s, n);
    }
    t->len += n;
    return ST_OK;
}

/* fmt formatted into a buffer of its own (*out, malloc'd by the allocator). */
static int format(struct text *t, char **out, size_t *n, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    if (len < 0) {
        va_end(again);
        return error_set(ST_INTERNAL, "cannot format a text from \"%s\"", fmt);
    }
    char *buf = grow_with(NULL, (size_t)len + 1);
    if (!buf) {
        va_end(again);
        return out_of_memory(t, t->len + (size_t)len);
    }
    vsnprintf(buf, (size_t)len + 1, fmt, again);
    va_end(again);
    *out = buf;
    *n = (size_t)len;
    return ST_OK;
}

int text_set(struct text *t, const char *s)
{
    if (t->s && s >= t->s && s < t->s + t->cap) {
        size_t n = strlen(s);
        memmove(t->s, s, n + 1);
        t->len = n;
        return ST_OK;
    }
    text_clear(t);
    return insert(t, 0, s, strlen(s));
}

int text_append(struct text *t, const char *s) { return insert(t, text_len(t), s, strlen(s)); }

int text_prepend(struct text *t, const char *s) { return insert(t, 0, s, strlen(s)); }

/* The formatted forms: set (at < 0), append (at = SIZE_MAX) or prepend (0). */
static int changef(struct text *t, int how, const char *fmt, va_list ap)
{
    char *buf;
    size_t n;
    int st = format(t, &buf, &n, fmt, ap);
    if (st)
        return st;
    if (how < 0)
        text_clear(t);
    st = insert(t, how > 0 ? text_len(t) : 0, buf, n);
    free(buf);
    return st;
}

int text_setf(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = changef(t, -1, fmt, ap);
    va_end(ap);
    return st;
}

int text_appendf(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = changef(t, 1, fmt, ap);
    va_end(ap);
    return st;
}

int text_prependf(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = changef(t, 0, fmt, ap);
    va_end(ap);
    return st;
}

void text_clear(struct text *t)
{
    if (t->s)
        t->s[0] = '\0';
    t->len = 0;
}

int text_check(const struct text *t, const char *what)
{
    if (!t->failed)
        return ST_OK;
    return error_set(ST_INTERNAL, "out of memory composing %s: it would be incomplete", what);
}

void text_free(struct text *t)
{
    free(t->s);
    memset(t, 0, sizeof *t);
}
