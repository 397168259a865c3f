/* recomputed_ops: see recomputed_ops.h. */
#include "recomputed_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double recomputed_ops_ms(const struct run_record *base, const struct run_record *run)
{
    static const char suffix[] = ".recompute_calls";
    double total = 0;
    int seen = 0;
    for (int i = 0; i < run->n_attrs; i++) {
        const char *key = run->attrs[i].key;
        size_t n = strlen(key);
        if (strncmp(key, "ops.", 4) != 0 || n <= 4 + sizeof suffix - 1 ||
            strcmp(key + n - (sizeof suffix - 1), suffix) != 0)
            continue;
        seen = 1;
        double calls = run->attrs[i].value;
        if (!(calls > 0))
            continue;
        char k_ms[RUN_ATTR_KEY_MAX], k_calls[RUN_ATTR_KEY_MAX];
        int op_len = (int)(n - 4 - (sizeof suffix - 1));
        snprintf(k_ms, sizeof k_ms, "ops.%.*s.forward_ms", op_len, key + 4);
        snprintf(k_calls, sizeof k_calls, "ops.%.*s.forward_calls", op_len, key + 4);
        double ms = run_record_attr(base, k_ms), per = run_record_attr(base, k_calls);
        if (isnan(ms) || !(per > 0))
            return NAN; /* an op the baseline did not time (or never ran) */
        total += calls * ms / per;
    }
    return seen ? total : NAN;
}
