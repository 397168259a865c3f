/* impl: the checkpoint implementations behind one interface. An impl wraps
 * a segment function (a run of model layers) and returns its output,
 * recording whatever nodes it needs: `none` runs it plainly, `reentrant`
 * and `nonreentrant` follow torch.utils.checkpoint's two styles (see
 * reentrant.c and nonreentrant.c), and impls/faulty/ holds planted-bug
 * variants, each a reference run with one of its services (services.h)
 * replaced by a wrong one. */
#ifndef CKPT_IMPL_H
#define CKPT_IMPL_H

#include <stddef.h>

#include "case.h"
#include "module_state.h"
#include "rng_stash.h"
#include "tape.h"

struct checkpoint_services;

/* A region holds at most this many tensor inputs and as many outputs. */
#define REGION_MAX_TENSORS 4

/* The non-tensor argument of a region, handed to its function unchanged in
 * forward and in every recompute, as torch.utils.checkpoint passes
 * non-tensor args through: never saved as a tensor, never differentiated. */
struct region_arg {
    double scalar;
    int integer;
};

/* The function a checkpoint wraps. Either one tensor in, one out (call:
 * out = f(in)), or a region (call_region, set instead): n_in tensor inputs,
 * any of which may require no grad, the non-tensor arg, and n_out tensor
 * outputs, any of which may require no grad (computed under no_grad, or
 * detached). n_in, n_out 0 mean 1, so {call, ctx} stays a one-tensor
 * segment. segment_call runs either kind. */
struct segment_fn {
    int (*call)(void *ctx, struct var *in, struct var **out);
    void *ctx;
    int (*call_region)(void *ctx, struct var *const *in, const struct region_arg *arg, struct var **out);
    int n_in, n_out;
    struct region_arg arg;
};

static inline int segment_n_in(const struct segment_fn *seg) { return seg->n_in > 0 ? seg->n_in : 1; }
static inline int segment_n_out(const struct segment_fn *seg) { return seg->n_out > 0 ? seg->n_out : 1; }
/* out[0..n_out) = seg(in[0..n_in), arg); on error every out[k] is NULL. */
int segment_call(const struct segment_fn *seg, struct var *const *in, struct var **out);
/* Releases out[0..n) and sets them to NULL. */
void region_release(struct var **out, int n);

/* PyTorch's context_fn: a pair of callbacks around the original forward and
 * around the recompute (enter before, exit after). Any may be NULL. */
struct context_hooks {
    void (*forward_enter)(void *ctx);
    void (*forward_exit)(void *ctx);
    void (*recompute_enter)(void *ctx);
    void (*recompute_exit)(void *ctx);
    void *ctx;
};

/* Everything a run tells the impl, and what it reports back. */
struct impl_options {
    int preserve_rng_state;
    enum rng_devices rng_devices;
    int current_device;          /* the device the case runs on */
    /* non-reentrant: what a recomputed saved tensor is checked against
     * (metadata by default; values: a fingerprint of its forward bytes).
     * Reentrant impls have no saved tensors to check and refuse `values`. */
    enum determinism_check determinism_check;
    int disable_early_stop;      /* non-reentrant: recompute the whole segment (PyTorch's early_stop=False) */
    const struct context_hooks *context;
    struct impl_stats *stats;    /* may be NULL */
    /* selective: the ops whose saved tensors are kept from forward, a bit
     * set over enum policy_op (harness/cases/policy.h); ignored by the others. */
    unsigned policy;
    /* The model's buffers (NULL or n = 0: a model without state). A
     * checkpoint snapshots them in forward and replays them in recompute
     * (module_state.h), as it does RNG and autocast. */
    struct module_state *state;
};

struct impl_stats {
    int checkpoints;             /* checkpointed segment forwards run */
    int recomputes;              /* recompute passes run */
    int recomputed_tensors;      /* saved tensors produced by recompute */
    double recompute_ms;
    int warnings;
    char warning[256];           /* the last warning */
    /* Set when a non-reentrant check found recompute != forward: the ops
     * that saved each tensor in forward and in recompute, side by side, up
     * to the first difference (several lines; run_record.op_log). */
    char op_log[2048];
    /* What an impl keeps alive past a step, released when the run ends
     * (impl_stats_release_held): only the planted leaked_recompute_frame
     * holds anything, so its leak shows between steps and never outlives
     * the run. */
    struct impl_held *held;
    /* Non-reentrant checkpoints: the ops (a bit set over enum policy_op,
     * by node name) whose saved tensors a checkpoint's forward packed, and
     * those of them whose tensor it kept from forward instead of leaving
     * it to the recompute. The judge holds them against what the policy
     * states (policy_statement.h). */
    unsigned ops_packed, ops_kept;
};

struct impl_held {
    void *object;
    void (*release)(void *object);
    struct impl_held *next;
};
/* Holds object until impl_stats_release_held (release called then). */
int impl_stats_hold(struct impl_stats *stats, void *object, void (*release)(void *object));
void impl_stats_release_held(struct impl_stats *stats);

struct checkpoint_impl {
    const char *name;
    const char *summary; /* one line for --help / the README */
    /* out[0..n_out) = seg(in[0..n_in)) (counts from seg), checkpointed as
     * this impl does it. */
    int (*run)(const struct checkpoint_impl *impl, const struct impl_options *opts,
               const struct segment_fn *seg, struct var *const *in, struct var **out);
    /* The services the run calls (services.h): NULL, or entries left NULL,
     * are the reference's; a planted bug sets the one it replaces. */
    const struct checkpoint_services *services;
    int is_reference; /* none, reentrant, nonreentrant, selective */
    /* Planted bugs: whether the bug can show in case c at all (NULL: it
     * always can). When it cannot, it writes what hides it to why (e.g.
     * "dropout = 0: nothing random to replay") and the runner turns a run
     * that matched the baseline into NOT_OBSERVABLE instead of a PASS. */
    int (*observable)(const struct ckpt_case *c, char *why, size_t len);
};

const struct checkpoint_impl *impl_find(const char *name);
/* Every impl, references first; NULL-terminated. */
const struct checkpoint_impl *const *impl_all(void);

/* Whether a built-in impl is a reentrant checkpoint (reentrant.c or a
 * planted bug built on it): it keeps no saved tensors, so it refuses
 * determinism_check = values. Checked before a run; a plugin's reentrant
 * impl refuses when it runs. */
int impl_is_reentrant(const struct checkpoint_impl *impl);

/* Shared by the reference impls and the planted bugs built on them. */
int impl_run_none(const struct checkpoint_impl *impl, const struct impl_options *opts,
                  const struct segment_fn *seg, struct var *const *in, struct var **out);
int impl_run_reentrant(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *const *in, struct var **out);
int impl_run_nonreentrant(const struct checkpoint_impl *impl, const struct impl_options *opts,
                          const struct segment_fn *seg, struct var *const *in, struct var **out);
/* Non-reentrant that caches the saved tensors of the ops in `keep` (a bit
 * set over enum policy_op) from forward and recomputes only the others. */
int impl_run_nonreentrant_keeping(const struct checkpoint_impl *impl, const struct impl_options *opts,
                                  const struct segment_fn *seg, struct var *const *in, struct var **out, unsigned keep);
/* impl_run_nonreentrant_keeping with the case's policy (impls/selective.c). */
int impl_run_selective(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *const *in, struct var **out);

#endif
