/* faulty: the planted bugs. Each is a reference checkpoint
 * (impls/reentrant.c, impls/nonreentrant.c, impls/selective.c) run with one
 * of its services (impls/services.h) replaced by a wrong one written here,
 * (stale_input and first_call_kernel wrap the run instead: their fault is
 * in the data around the checkpoint), standing for a failure seen in real
 * frameworks, with a rule that says in which cases it can show at all
 * (checkpoint_impl.observable). The file of each bug names
 * the failure and the detector that must catch it; cases/mutation.ini says
 * where, and `ckpt-verify --suite mutation` proves every one is caught. */
#ifndef CKPT_FAULTY_H
#define CKPT_FAULTY_H

#include <stddef.h>

#include "../../harness/error.h"
#include "../impl.h"
#include "../services.h"

extern const struct checkpoint_impl impl_no_rng_stash;
extern const struct checkpoint_impl impl_no_rng_stash_nr;
extern const struct checkpoint_impl impl_rng_not_forked;
extern const struct checkpoint_impl impl_args_only_rng;
extern const struct checkpoint_impl impl_autocast_not_restored;
extern const struct checkpoint_impl impl_autocast_not_restored_nr;
extern const struct checkpoint_impl impl_counter_reset;
extern const struct checkpoint_impl impl_recompute_elided;
extern const struct checkpoint_impl impl_stale_input;
extern const struct checkpoint_impl impl_first_call_kernel;
/* selective checkpointing's (selective_bugs.c) */
extern const struct checkpoint_impl impl_policy_ignored;
extern const struct checkpoint_impl impl_attention_swapped_for_dropout;
extern const struct checkpoint_impl impl_stale_cache;
extern const struct checkpoint_impl impl_mutated_saved_output;
extern const struct checkpoint_impl impl_rng_op_saved_without_replay;
/* module state's (state_bugs.c) */
extern const struct checkpoint_impl impl_state_double_update;
extern const struct checkpoint_impl impl_scale_not_restored;
extern const struct checkpoint_impl impl_amax_updated_in_recompute;
/* the backward API's and the leak check's */
extern const struct checkpoint_impl impl_hook_fires_twice;
extern const struct checkpoint_impl impl_leaked_recompute_frame;

/* Observability rules shared by the bugs (observable.c). Each returns 1 when
 * the condition holds, else 0 with the reason in why. */
/* At least one segment is checkpointed (segments = 1 runs every layer plainly). */
int faulty_has_checkpoints(const struct ckpt_case *c, char *why, size_t len);
/* A checkpointed segment draws random numbers that must be replayed:
 * dropout > 0 or RReLU, and preserve_rng_state on. */
int faulty_replays_rng(const struct ckpt_case *c, char *why, size_t len);

#endif
