#include "checkpoint_env.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../harness/aten/aten.h"
#include "../harness/error.h"

double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int checkpoint_env_capture(struct checkpoint_env *env, const struct checkpoint_impl *impl,
                           const struct impl_options *opts, struct var *const *in, int n_in)
{
    memset(env, 0, sizeof *env);
    env->preserve_rng = env->replay_rng = opts->preserve_rng_state;
    env->autocast = autocast_get();
    checkpoint_services_resolve(&env->services, impl->services);
    env->context = opts->context;
    env->stats = opts->stats;
    env->state = opts->state;
    if (env->stats)
        env->stats->checkpoints++;
    if (env->state && env->state->n) {
        int st = module_state_snapshot(env->state, &env->forward_state);
        if (st)
            return st;
    }
    if (!env->preserve_rng)
        return ST_OK;
    struct rng_device_set set;
    int arg_devices[REGION_MAX_TENSORS];
    for (int i = 0; i < n_in && i < REGION_MAX_TENSORS; i++)
        arg_devices[i] = tensor_device(in[i]->data);
    enum rng_devices policy = env->services.rng_devices(opts->rng_devices);
    rng_device_set_build(&set, arg_devices, n_in < REGION_MAX_TENSORS ? n_in : REGION_MAX_TENSORS,
                         opts->current_device, policy);
    int st = rng_stash_capture(&env->forward_rng, &set);
    struct rng_device_set unstashed;
    rng_device_set_unstashed(&unstashed, &set, &opts->current_device, 1);
    if (!st && unstashed.n)
        st = rng_stash_capture(&env->unstashed_rng, &unstashed);
    return st;
}

/* "cpu, cuda:0" */
static void device_list(const struct rng_device_set *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < set->n && used < len; i++) {
        char dev[32];
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", aten_device_str(set->devices[i], dev, sizeof dev));
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

int checkpoint_env_check_forward(struct checkpoint_env *env)
{
    if (!env->unstashed_rng.set.n)
        return ST_OK;
    struct rng_stash now;
    int st = rng_stash_capture(&now, &env->unstashed_rng.set);
    int changed = st ? -1 : rng_stash_first_changed(&env->unstashed_rng, &now);
    rng_stash_free(&now);
    if (!st && changed >= 0) {
        char dev[32], stashed[256];
        aten_device_str(env->unstashed_rng.set.devices[changed], dev, sizeof dev);
        device_list(&env->forward_rng.set, stashed, sizeof stashed);
        st = error_set(ST_MISMATCH,
                       "checkpoint: the segment drew random numbers on %s, whose RNG state was not stashed "
                       "(stashed: %s); its recompute cannot replay them (stash the current device too: "
                       "rng_devices = args+current)",
                       dev, stashed);
    }
    rng_stash_free(&env->unstashed_rng);
    return st;
}

int checkpoint_env_enter(struct checkpoint_env *env, struct recompute_frame *frame)
{
    memset(frame, 0, sizeof *frame);
    frame->started_ms = monotonic_ms();
    frame->grad_mode = grad_mode_set(1);
    frame->autocast = autocast_get();
    env->services.autocast_replay(env->autocast);
    if (env->replay_rng) {
        int st = env->services.rng_replay(&env->forward_rng, &frame->surrounding_rng, &frame->forked);
        if (st)
            return st;
    }
    if (env->state) {
        int st = env->services.state_replay(env->state, &env->forward_state, &frame->state);
        if (st)
            return st;
        frame->state_entered = 1;
    }
    if (env->context && env->context->recompute_enter)
        env->context->recompute_enter(env->context->ctx);
    return ST_OK;
}

int checkpoint_env_exit(struct checkpoint_env *env, struct recompute_frame *frame)
{
    int st = ST_OK;
    if (env->context && env->context->recompute_exit)
        env->context->recompute_exit(env->context->ctx);
    if (frame->state_entered)
        module_state_recompute_exit(env->state, &frame->state);
    if (frame->forked) {
        st = rng_stash_restore(&frame->surrounding_rng);
        rng_stash_free(&frame->surrounding_rng);
    }
    autocast_set(frame->autocast);
    grad_mode_set(frame->grad_mode);
    if (env->stats) {
        env->stats->recomputes++;
        env->stats->recompute_ms += monotonic_ms() - frame->started_ms;
    }
    return st;
}

void checkpoint_env_free(struct checkpoint_env *env)
{
    rng_stash_free(&env->forward_rng);
    rng_stash_free(&env->unstashed_rng);
    state_snapshot_free(&env->forward_state);
}
