#include "verdict.h"

#include <stdio.h>
#include <string.h>

static const char *const verdict_names[V_COUNT] = {
    "PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR", "NOT_OBSERVABLE",
};

const char *verdict_name(enum verdict v) { return (unsigned)v < V_COUNT ? verdict_names[v] : "?"; }

const char *verdict_mask_text(unsigned mask, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    for (int v = 0; v < V_COUNT && len; v++) {
        if (!(mask & (1u << v)))
            continue;
        int n = snprintf(buf + at, len - at, "%s%s", at ? "|" : "", verdict_names[v]);
        if (n < 0 || (size_t)n >= len - at)
            break;
        at += (size_t)n;
    }
    return buf;
}

int verdict_from_name(const char *name)
{
    for (int v = 0; v < V_COUNT; v++)
        if (strcmp(name, verdict_names[v]) == 0)
            return v;
    return -1;
}
