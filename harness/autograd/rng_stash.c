#include "rng_stash.h"

#include <stdlib.h>
#include <string.h>

#include "aten/aten.h"
#include "error.h"

static void set_add(struct rng_device_set *set, int device)
{
    for (int i = 0; i < set->n; i++)
        if (set->devices[i] == device)
            return;
    if (set->n == RNG_MAX_DEVICES)
        return;
    /* Keep ascending order: DEVICE_CPU (-1) sorts first. */
    int at = set->n;
    while (at > 0 && set->devices[at - 1] > device) {
        set->devices[at] = set->devices[at - 1];
        at--;
    }
    set->devices[at] = device;
    set->n++;
}

void rng_device_set_build(struct rng_device_set *set, const int *arg_devices, int n_args,
                          int current_device, enum rng_devices policy)
{
    memset(set, 0, sizeof *set);
    set_add(set, DEVICE_CPU);
    for (int i = 0; i < n_args; i++)
        set_add(set, arg_devices[i]);
    if (policy == RNG_ARGS_AND_CURRENT)
        set_add(set, current_device);
}

void rng_device_set_unstashed(struct rng_device_set *out, const struct rng_device_set *stashed,
                              const int *devices, int n)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) {
        int in_stash = 0;
        for (int k = 0; k < stashed->n && !in_stash; k++)
            in_stash = stashed->devices[k] == devices[i];
        if (!in_stash)
            set_add(out, devices[i]);
    }
}

int rng_stash_capture(struct rng_stash *stash, const struct rng_device_set *set)
{
    memset(stash, 0, sizeof *stash);
    stash->set = *set;
    for (int i = 0; i < set->n; i++) {
        int st = aten_rng_get_state(set->devices[i], &stash->state[i], &stash->len[i]);
        if (st) {
            rng_stash_free(stash);
            return st;
        }
    }
    return ST_OK;
}

int rng_stash_restore(const struct rng_stash *stash)
{
    for (int i = 0; i < stash->set.n; i++) {
        int st = aten_rng_set_state(stash->set.devices[i], stash->state[i], stash->len[i]);
        if (st)
            return st;
    }
    return ST_OK;
}

void rng_stash_free(struct rng_stash *stash)
{
    for (int i = 0; i < RNG_MAX_DEVICES; i++) {
        free(stash->state[i]);
        stash->state[i] = NULL;
    }
    stash->set.n = 0;
}

int rng_stash_first_changed(const struct rng_stash *a, const struct rng_stash *b)
{
    for (int i = 0; i < a->set.n && i < b->set.n; i++) {
        if (a->set.devices[i] != b->set.devices[i] || a->len[i] != b->len[i])
            return i;
        if (a->len[i] && memcmp(a->state[i], b->state[i], a->len[i]) != 0)
            return i;
    }
    return a->set.n == b->set.n ? -1 : (a->set.n < b->set.n ? a->set.n : b->set.n);
}
