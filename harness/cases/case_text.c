#include "case_text.h"

#include "case.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct span text_trim(const char *p, size_t n)
{
    while (n && isspace((unsigned char)p[0])) {
        p++;
        n--;
    }
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    return (struct span){p, n};
}

/* Where a list starts: NULL for a blank value, so that "" is the empty list
 * and not a list holding one empty item. */
const char *text_list_start(const char *value)
{
    return text_trim(value, strlen(value)).n ? value : NULL;
}

/* The next `sep`-separated item, trimmed; *cursor becomes NULL after the
 * last one. "a,,b" yields an empty middle item, which callers reject. */
int text_next_item(const char **cursor, char sep, struct span *item)
{
    const char *p = *cursor;
    if (!p)
        return 0;
    const char *end = strchr(p, sep);
    *item = text_trim(p, end ? (size_t)(end - p) : strlen(p));
    *cursor = end ? end + 1 : NULL;
    return 1;
}

/* Copies a span into a NUL-terminated buffer; -1 if it does not fit. */
int text_span_copy(struct span s, char *dst, size_t cap)
{
    if (s.n >= cap)
        return -1;
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
    return 0;
}

static int is_ascii_alnum(char ch) { return isalnum((unsigned char)ch) && (unsigned char)ch < 128; }

/* Non-empty, letters and digits plus the characters in `extra`. */
int text_is_word(const char *s, const char *extra)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!is_ascii_alnum(*s) && !strchr(extra, *s))
            return 0;
    return 1;
}

/* Case names become file names, CTest test names and HDF5 attributes, so
 * they keep to characters that need no quoting anywhere. */
int text_is_case_name(const char *s)
{
    return (is_ascii_alnum(s[0]) || s[0] == '_') && text_is_word(s, "_.-");
}

int text_is_impl_name(const char *s) { return text_is_word(s, "_"); }
int text_is_label_name(const char *s) { return text_is_word(s, "_-"); }

int text_equals_ignoring_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

/* Levenshtein distance; `b` is a known name (case or key), so its length is
 * bounded and one row buffer on the stack is enough. */
int text_edit_distance(const char *a, const char *b)
{
    int row[CASE_NAME_MAX + 1];
    int nb = (int)strlen(b);
    if (nb > CASE_NAME_MAX)
        return INT_MAX / 2;
    for (int j = 0; j <= nb; j++)
        row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int diagonal = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int above = row[j];
            int substitute = diagonal + (a[i - 1] != b[j - 1]);
            int best = above + 1 < row[j - 1] + 1 ? above + 1 : row[j - 1] + 1;
            row[j] = substitute < best ? substitute : best;
            diagonal = above;
        }
    }
    return row[nb];
}

/* Close enough to suggest: a few edits, scaled with the length typed. */
int text_is_near_miss(const char *typed, int distance)
{
    int allowed = (int)strlen(typed) / 3;
    return distance <= (allowed > 2 ? allowed : 2);
}

struct suggestion {
    int distance, index;
};

static int compare_suggestions(const void *a, const void *b)
{
    const struct suggestion *x = a, *y = b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int text_suggest(const char *typed, const char *(*name_at)(const void *ctx, int i), const void *ctx, int count,
                 const char **out, int n)
{
    if (n <= 0 || count <= 0)
        return 0;
    struct suggestion *found = malloc((size_t)count * sizeof *found);
    if (!found)
        return 0;
    int k = 0;
    for (int i = 0; i < count; i++) {
        const char *name = name_at(ctx, i);
        int d = text_edit_distance(typed, name);
        if (text_is_near_miss(typed, d) || (*typed && strstr(name, typed)))
            found[k++] = (struct suggestion){d, i};
    }
    qsort(found, (size_t)k, sizeof *found, compare_suggestions);
    if (k > n)
        k = n;
    for (int i = 0; i < k; i++)
        out[i] = name_at(ctx, found[i].index);
    free(found);
    return k;
}

void text_format_suggestions(char *buf, size_t len, const char *const *near, int n, const char *otherwise)
{
    buf[0] = '\0';
    for (int k = 0; k < n; k++) {
        text_buf_append(buf, len, k ? ", " : " (did you mean: ");
        text_buf_append(buf, len, near[k]);
    }
    text_buf_append(buf, len, n ? "?)" : otherwise);
}

/* Whole-string decimal integer in [min, max]: no '+', no blanks, no tail. */
int text_parse_long(const char *s, long min, long max, long *out)
{
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Whole-string finite number in [min, max]. */
int text_parse_real(const char *s, double min, double max, double *out)
{
    if (!*s || isspace((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Shortest text that reads back as the same double ("0.01", not
 * "0.010000000000000000208"), so attributes stay readable and exact. */
void text_format_real(double x, char *buf, size_t n)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

int text_name_index(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

void text_buf_append(char *buf, size_t n, const char *text)
{
    size_t used = strlen(buf);
    if (used + 1 < n)
        snprintf(buf + used, n - used, "%s", text);
}


const char *text_format_bytes(double v, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (u < 5 && v >= 1024) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}
