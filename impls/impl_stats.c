/* impl_stats: what a run holds for its impl until the run ends (impl.h). */
#include <stdlib.h>

#include "../harness/error.h"
#include "impl.h"

int impl_stats_hold(struct impl_stats *stats, void *object, void (*release)(void *object))
{
    if (!stats)
        return error_set(ST_INTERNAL, "holding an object for the run needs the run's impl_stats");
    struct impl_held *h = malloc(sizeof *h);
    if (!h)
        return error_set(ST_RUN, "out of memory holding an object for the run");
    h->object = object;
    h->release = release;
    h->next = stats->held;
    stats->held = h;
    return ST_OK;
}

void impl_stats_release_held(struct impl_stats *stats)
{
    while (stats && stats->held) {
        struct impl_held *h = stats->held;
        stats->held = h->next;
        h->release(h->object);
        free(h);
    }
}
