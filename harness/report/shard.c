#include "shard.h"

#include <errno.h>
#include <stdlib.h>

#include "error.h"

static int parse_part(const char *s, char **end, long *v)
{
    if (*s < '0' || *s > '9') /* strtol would take blanks and signs */
        return 0;
    errno = 0;
    *v = strtol(s, end, 10);
    return errno == 0 && *v >= 1 && *v <= SHARD_MAX;
}

int shard_parse(const char *text, struct shard *out)
{
    char *end;
    long k, n;
    if (!parse_part(text, &end, &k) || *end != '/' || !parse_part(end + 1, &end, &n) || *end != '\0')
        return error_set(ST_INPUT, "--shard: '%s' is not K/N with 1 <= K <= N <= %d", text, SHARD_MAX);
    if (k > n)
        return error_set(ST_INPUT, "--shard: '%s': K must not exceed N", text);
    out->k = (int)k;
    out->n = (int)n;
    return ST_OK;
}

int shard_takes(const struct shard *s, int index) { return index % s->n == s->k - 1; }
