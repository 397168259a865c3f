/* rng_stash: which devices' default generators a checkpoint stashes, and
 * the stash / fork / restore of their states. The device set is plain C
 * (unit-tested with fake device ids): CPU always, then the devices of the
 * segment's tensor arguments, then (rng_devices = args+current) the
 * current device; de-duplicated, CPU first, CUDA ids ascending. PyTorch's
 * own policy is RNG_ARGS_ONLY. The devices a set leaves out are watched
 * during the forward: a draw there cannot be replayed. State get/set goes
 * through the shim. */
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
                          int current_device, enum rng_devices policy);
/* The devices of devices[0..n) that `stashed` leaves out (CPU never is). */
void rng_device_set_unstashed(struct rng_device_set *out, const struct rng_device_set *stashed,
                              const int *devices, int n);

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
/* Two stashes of the same set: the index (into a->set) of the first device
 * whose state differs — its generator drew in between — or -1. */
int rng_stash_first_changed(const struct rng_stash *a, const struct rng_stash *b);

#endif
