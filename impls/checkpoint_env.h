/* checkpoint_env: what a checkpoint captures in forward to replay in
 * recompute — the RNG states of its device set and the autocast state —
 * and the enter/exit pair that puts them in force around a recompute under
 * a forked RNG (the surrounding streams are restored on exit), as
 * torch.utils.checkpoint does. Shared by both reference styles; every
 * stash and replay goes through the impl's services (services.h). */
#ifndef CKPT_CHECKPOINT_ENV_H
#define CKPT_CHECKPOINT_ENV_H

#include "autocast.h"
#include "rng_stash.h"
#include "impl.h"
#include "services.h"

struct checkpoint_env {
    int preserve_rng;                 /* the forward stashed RNG */
    /* The recompute replays it: preserve_rng, unless a store that keeps
     * some ops' saved tensors has its rng_replay_needed service say no. */
    int replay_rng;
    struct rng_stash forward_rng;     /* states when the forward began */
    /* Devices the stash leaves out (the current one, under rng_devices =
     * args), watched during the forward: a draw there cannot be replayed. */
    struct rng_stash unstashed_rng;
    struct autocast_state autocast;   /* autocast when the forward began */
    struct module_state *state;       /* the model's buffers (may be NULL) */
    struct state_snapshot forward_state; /* the buffers when the forward began */
    struct checkpoint_services services; /* the impl's, resolved (services.h) */
    const struct context_hooks *context;
    struct impl_stats *stats;
};

/* Saved across a recompute, to put back on exit. */
struct recompute_frame {
    struct rng_stash surrounding_rng;
    int forked;
    struct autocast_state autocast;
    struct state_recompute state;
    int state_entered;
    int grad_mode;
    double started_ms;
};

/* In forward, before running the segment: stashes RNG (if preserving) for
 * CPU + the devices of the tensor inputs in[0..n_in) (+ the current
 * device, per policy), and copies the model's buffers; resolves the
 * impl's services into env->services. */
int checkpoint_env_capture(struct checkpoint_env *env, const struct checkpoint_impl *impl,
                           const struct impl_options *opts, struct var *const *in, int n_in);
/* After the forward of the segment (before its output is handed out): a
 * device the stash left out whose generator drew during the forward is
 * ST_MISMATCH, naming it — the recompute cannot replay those draws. The
 * harness's counterpart of PyTorch's error for a device state initialised
 * in a checkpoint's forward. */
int checkpoint_env_check_forward(struct checkpoint_env *env);
/* Before a recompute, through the services: fork RNG and replay the stash,
 * restore autocast, point the model's buffers at a copy of the forward's;
 * grad on. */
int checkpoint_env_enter(struct checkpoint_env *env, struct recompute_frame *frame);
/* After it (always call, also on failure): restores what enter changed. */
int checkpoint_env_exit(struct checkpoint_env *env, struct recompute_frame *frame);
void checkpoint_env_free(struct checkpoint_env *env);

/* Monotonic clock in milliseconds. */
double monotonic_ms(void);

#endif
