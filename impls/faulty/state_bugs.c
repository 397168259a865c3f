/* state_bugs: checkpoints that mishandle module state — buffers a forward
 * reads and updates outside the graph (module_state.h). The reference
 * recompute reads a copy of the state as its forward found it and throws
 * its own updates away. Each bug breaks one half of that:
 *
 * state_double_update: no state handling at all; the recompute reads the
 *   live state and updates it again. Real failure: torch.utils.checkpoint
 *   itself, both styles, with BatchNorm in training (PyTorch #96136):
 *   running statistics move twice per step. Reentrant base.
 * scale_not_restored: the recompute's updates are discarded, but it reads
 *   the live state, which its forward already updated: a quantising layer
 *   recomputes with the next step's scale, so the saved tensors (and the
 *   weight gradients) differ from forward's. Real failure: FP8 scaling
 *   state not carried into the recompute (TransformerEngine #1190/#1254).
 *   Non-reentrant base.
 * amax_updated_in_recompute: the recompute reads the forward's state, but
 *   its updates land in the live state: the amax history takes a second
 *   entry per step (and batch-norm statistics a second update).
 *   Real failure: TransformerEngine #539. Non-reentrant base.
 *
 * Caught by: the per-step buffers (steps/<k>/buffers/) for the updates,
 * the gradients for a wrong scale. Not observable without buffers (every
 * model but bn_mlp and scaled_mlp) or without a checkpointed layer; a
 * wrong read is not observable in bn_mlp, whose batch norm in training
 * reads no state (it normalises with the batch's statistics). */
#include <stdio.h>

#include "faulty.h"

/* The three wrong state_replay services: module_state_recompute_enter with
 * the half of STATE_REPLAY each bug breaks (module_state.h). */
static int state_replay_live(struct module_state *state, const struct state_snapshot *forward,
                             struct state_recompute *frame)
{
    return module_state_recompute_enter(state, forward, STATE_LIVE, frame);
}

static int state_replay_read_live(struct module_state *state, const struct state_snapshot *forward,
                                  struct state_recompute *frame)
{
    return module_state_recompute_enter(state, forward, STATE_READ_LIVE, frame);
}

static int state_replay_write_live(struct module_state *state, const struct state_snapshot *forward,
                                   struct state_recompute *frame)
{
    return module_state_recompute_enter(state, forward, STATE_WRITE_LIVE, frame);
}

static const struct checkpoint_services state_double_update_services = {.state_replay = state_replay_live};
static const struct checkpoint_services scale_not_restored_services = {.state_replay = state_replay_read_live};
static const struct checkpoint_services amax_updated_in_recompute_services = {.state_replay = state_replay_write_live};

static int has_state(const struct ckpt_case *c, char *why, size_t len)
{
    if (c->model != MODEL_BN_MLP && c->model != MODEL_SCALED_MLP) {
        snprintf(why, len, "model %s has no buffers: no state to update or read", case_model_name(c->model));
        return 0;
    }
    return faulty_has_checkpoints(c, why, len);
}

static int reads_state(const struct ckpt_case *c, char *why, size_t len)
{
    if (!has_state(c, why, len))
        return 0;
    if (c->model == MODEL_BN_MLP) {
        snprintf(why, len, "bn_mlp's batch norm in training reads no state (batch statistics): only updates show, "
                           "and this recompute discards them");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_state_double_update = {
    .name = "state_double_update",
    .summary = "planted bug: reentrant, recompute reads and updates the live buffers (BatchNorm stats move twice)",
    .run = impl_run_reentrant,
    .services = &state_double_update_services,
    .observable = has_state,
};

const struct checkpoint_impl impl_scale_not_restored = {
    .name = "scale_not_restored",
    .summary = "planted bug: non-reentrant, recompute quantises with the scale its forward already updated",
    .run = impl_run_nonreentrant,
    .services = &scale_not_restored_services,
    .observable = reads_state,
};

const struct checkpoint_impl impl_amax_updated_in_recompute = {
    .name = "amax_updated_in_recompute",
    .summary = "planted bug: non-reentrant, recompute's state updates (amax history) land in the live buffers",
    .run = impl_run_nonreentrant,
    .services = &amax_updated_in_recompute_services,
    .observable = has_state,
};
