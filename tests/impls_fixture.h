/* impls_fixture: the shared fixture of the reference-checkpoint suites
 * (test_impls, test_impls_regions): a small segment y = dropout(gelu(x·Wᵀ + b))
 * with switches that change what its n-th call computes, a fresh seeded
 * fixture per test, and runs of the segment through any registered impl
 * against the plain ("none") run's gradients. */
#ifndef CKPT_TESTS_IMPLS_FIXTURE_H
#define CKPT_TESTS_IMPLS_FIXTURE_H

#include <stdint.h>

#include "impl.h"
#include "tape.h"

#define HIDDEN 8
/* A cmocka test run with a fresh fixture. */
#define FIXTURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, impls_fixture_setup, impls_fixture_teardown)

struct seg_state {
    struct var *w, *b;
    double p;
    int calls;
    /* Test switches: change what the n-th call computes. */
    int cast_on_call;      /* on this call, compute in bfloat16 */
    int shift_on_call;     /* on this call, add 1e-3 before gelu */
    int trailing_add;      /* end with an op that saves nothing */
    int trailing_adds_run;
    int skip_dropout_on_call; /* on this call, end after gelu: one saved tensor fewer */
    int extra_gelu_on_call;   /* on this call, end with another gelu: one saved tensor more */
};

struct fixture {
    struct seg_state seg;
    struct var *x;
    struct impl_stats stats;
    struct impl_options opts;
};

/* The segment's forward (ctx: a struct seg_state). */
int seg_call(void *ctx, struct var *in, struct var **out);
/* A float32 leaf of normal(0, 0.5) values from the CPU generator. */
struct var *random_leaf(int ndim, const int64_t *shape, int requires_grad, const char *name);
/* cmocka setup and teardown of a struct fixture (seed 7). */
int impls_fixture_setup(void **state);
int impls_fixture_teardown(void **state);
/* A one-tensor segment: y = fn(ctx, x). */
struct segment_fn segment_of(int (*fn)(void *ctx, struct var *in, struct var **out), void *ctx);
/* Forward through impl, sum-of-squares loss, full backward. Returns the
 * backward's status; the caller reads ->grad. */
int run_segment(struct fixture *f, const char *impl_name, struct segment_fn fn, int *forward_status);
int run_checkpointed(struct fixture *f, const char *impl_name, int *forward_status);
tensor *clone_of(const tensor *t);
/* The fixture's w, b and x gradients bitwise equal to ref (w, b, x). */
void assert_same_grads(struct fixture *f, tensor *const ref[3]);
/* The plain ("none") run's gradients from seed, cloned into ref. */
void reference_grads(struct fixture *f, uint64_t seed, tensor *ref[3]);
void free3(tensor *t[3]);

#endif
