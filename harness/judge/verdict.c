#include "verdict.h"

#include <string.h>

static const char *const verdict_names[V_COUNT] = {
    "PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR", "NOT_OBSERVABLE",
};

const char *verdict_name(enum verdict v) { return (unsigned)v < V_COUNT ? verdict_names[v] : "?"; }

int verdict_from_name(const char *name)
{
    for (int v = 0; v < V_COUNT; v++)
        if (strcmp(name, verdict_names[v]) == 0)
            return v;
    return -1;
}
