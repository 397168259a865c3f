/* Helpers every cmocka suite of the ATen-backed code shares: a status check
 * that reports the error slot's message, and a tiny seedable RNG whose
 * sequence is the same on every platform. Include after <cmocka.h>. */
#ifndef CKPT_TEST_SUPPORT_H
#define CKPT_TEST_SUPPORT_H

#include <stdint.h>

#include "../harness/error.h"

/* A call that must succeed; on failure the shim's message is the report. */
#define assert_ok(call)                                                                    \
    do {                                                                                   \
        int st_ = (call);                                                                  \
        if (st_ != ST_OK)                                                                  \
            fail_msg("%s -> status %d: %s", #call, st_, error_message());                  \
    } while (0)

/* splitmix64. The state lives in the caller, so tests share nothing. */
struct rng {
    uint64_t s;
};

static inline uint64_t rng_next(struct rng *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline double rng_uniform(struct rng *g, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rng_next(g) >> 11) * 0x1p-53);
}

#endif
