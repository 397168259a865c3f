/* rng_stash: which devices' default generators a checkpoint stashes, and
 * the stash / fork / restore of their states. The device set is plain C
 * (unit-tested with fake device ids): CPU always, then the devices of the
 * segment's tensor arguments, then (policy RNG_ARGS_AND_CURRENT) the
 * current device; de-duplicated, CPU first, CUDA ids ascending. PyTorch's
 * own policy is RNG_ARGS_ONLY. State get/set goes through the shim. */
#ifndef CKPT_RNG_STASH_H
#define CKPT_RNG_STASH_H

#include <stddef.h>
#include <stdint.h>

#include "case.h"

#define RNG_MAX_DEVICES 17

struct rng_device_set {
    int n;
    int devices[RNG_MAX_DEVICES]; /* DEVICE_CPU (-1) first, then CUDA ids */
};

void rng_device_set_build(struct rng_device_set *set, const int *arg_devices, int n_args,
                          int current_device, enum rng_policy policy);

struct rng_stash {
    struct rng_device_set set;
    uint8_t *state[RNG_MAX_DEVICES];
    size_t len[RNG_MAX_DEVICES];
};

/* Reads the state of every device in set. */
int rng_stash_capture(struct rng_stash *stash, const struct rng_device_set *set);
/* Writes the stashed states back. */
int rng_stash_restore(const struct rng_stash *stash);
void rng_stash_free(struct rng_stash *stash);

#endif
