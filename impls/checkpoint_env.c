#include "checkpoint_env.h"

#include <string.h>
#include <time.h>

#include "../harness/error.h"

double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int checkpoint_env_capture(struct checkpoint_env *env, const struct checkpoint_impl *impl,
                           const struct impl_options *opts, const struct var *in)
{
    memset(env, 0, sizeof *env);
    env->preserve_rng = opts->preserve_rng_state;
    env->autocast = autocast_get();
    env->mutation = &impl->mutation;
    env->context = opts->context;
    env->stats = opts->stats;
    if (env->stats)
        env->stats->checkpoints++;
    if (!env->preserve_rng)
        return ST_OK;
    struct rng_device_set set;
    int arg_device = tensor_device(in->data);
    enum rng_policy policy = impl->mutation.force_args_only_rng ? RNG_ARGS_ONLY : opts->rng_policy;
    rng_device_set_build(&set, &arg_device, 1, opts->current_device, policy);
    return rng_stash_capture(&env->forward_rng, &set);
}

int checkpoint_env_enter(struct checkpoint_env *env, struct recompute_frame *frame)
{
    memset(frame, 0, sizeof *frame);
    frame->started_ms = monotonic_ms();
    frame->grad_mode = grad_mode_set(1);
    frame->autocast = autocast_get();
    if (!env->mutation->skip_autocast_restore)
        autocast_set(env->autocast);
    if (env->preserve_rng && !env->mutation->skip_rng_restore) {
        if (!env->mutation->skip_rng_fork) {
            int st = rng_stash_capture(&frame->surrounding_rng, &env->forward_rng.set);
            if (st)
                return st;
            frame->forked = 1;
        }
        int st = rng_stash_restore(&env->forward_rng);
        if (st)
            return st;
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

void checkpoint_env_free(struct checkpoint_env *env) { rng_stash_free(&env->forward_rng); }
