/* ops_oracle_check: what the ops suites (test_ops, test_ops_random) share to
 * hold an op of harness/autograd/ops.h to libtorch's autograd (aten/oracle.h):
 * seeded inputs and leaves, an op's output and gradients checked bitwise
 * against the oracle's, probes for the dtypes a libtorch may lack, and an
 * element-wise comparison with bounds for what is not bitwise. Every check
 * fails the running cmocka test; include after <cmocka.h>.
 *
 * The one piece of state: TEST_OPS_REPORT=1 in the environment (read by
 * setup_group) prints every comparison, bitwise or max ULP; ops_report()
 * says whether it is on. */
#ifndef CKPT_TEST_OPS_ORACLE_CHECK_H
#define CKPT_TEST_OPS_ORACLE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "aten/aten.h"
#include "tape.h"

#define MAX_IN 4
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Whether TEST_OPS_REPORT is on (after setup_group). */
int ops_report(void);

/* ---- inputs -------------------------------------------------------------- */

void free_tensors(tensor **ts, int n);
/* Normal(0, std) drawn in float32 from its own seed, then cast to dt (so the
 * same seed gives the same values, rounded, in every dtype). */
tensor *randn_t(enum dtype dt, int nd, const int64_t *shape, uint64_t seed, double std);
/* An upstream gradient of y's shape and dtype, from its own seed. */
tensor *grad_like(const tensor *y, uint64_t seed);
tensor *cast(const tensor *t, enum dtype dt);
/* A leaf that requires grad; takes ownership of t. */
struct var *leaf(tensor *t, const char *name);
struct var *constant(tensor *t);

const char *shape_str(int nd, const int64_t *shape, char *buf, size_t len);
/* "<op> <dtype> [shape]" */
void label_of(char *buf, size_t len, const char *op, enum dtype dt, int nd, const int64_t *shape);

/* Shapes: a 2-D batch of one row, 3-D with batch 1, 3-D with batch > 1 and
 * an odd last dim (vector tails). */
struct shape {
    int nd;
    int64_t s[3];
};

extern const struct shape k_shapes[4];

/* ---- bitwise against the oracle ----------------------------------------- */

/* ours vs torch through compare_tensors: fails unless bitwise equal. */
void expect_bitwise(const char *what, const tensor *ours, const tensor *torch);

/* The oracle's view of one op application: which op, on which vars (in the
 * oracle's input order), with which params. */
struct oracle_case {
    char label[128];
    const char *op;
    struct var *in[MAX_IN];
    int n_in;
    double params[2];
    int n_params;
    /* Random ops: the CPU default generator is seeded with this before the
     * oracle runs; the caller seeds it identically right before our op. */
    int reseed;
    uint64_t seed;
};

/* Backward through the tape from y with a random upstream gradient, then
 * torch on the same inputs and upstream gradient; y and the gradient of
 * every input that requires grad must be bitwise torch's. */
void check_bitwise_against_torch(const struct oracle_case *c, struct var *y, uint64_t grad_seed);

/* ---- dtypes a libtorch may lack -------------------------------------------
 * An op tried on small probe inputs in a dtype whose CPU kernels depend on
 * the libtorch version: ours (apply) and torch's (the oracle) on the same
 * values. */
struct probe {
    const char *what;
    const char *oracle_op;
    struct var *v[MAX_IN]; /* ours */
    int n_v;
    const tensor *in[MAX_IN]; /* the oracle's inputs (the same values) */
    int n_in;
    double params[2]; /* the op's params, as the oracle takes them */
    int n_params;
    int arg; /* what only ours takes: gelu's tanh flag, attention's heads */
};

typedef int (*apply_fn)(struct var **y, const struct probe *p);

/* Returns 1 when this libtorch runs the probe forward and backward: the
 * caller then holds ours to torch's results over every shape. Otherwise
 * checks that ours fails where torch does: in the op itself (no output), or
 * in backward after a forward bitwise torch's (both draw from the same
 * generator state). */
int torch_runs_else_ours_fails_alike(const struct probe *p, apply_fn apply);
void probe_release(struct probe *p);

/* ---- the cmocka group ----------------------------------------------------- */

/* Group setup: reads TEST_OPS_REPORT, starts ATen. */
int setup_group(void **state);
/* Every test starts with grad mode on and autocast off, whatever the
 * previous one left after a failure. */
int reset_state(void **state);

/* ---- element-wise comparison on the host -------------------------------- */

#define TWO_M24 0x1p-24

struct floats {
    float *v;
    size_t n;
};

/* t's values as float32 on the host (widening is exact). */
struct floats host_floats(const tensor *t);
int mantissa_bits(enum dtype dt);

/* One element-wise comparison: |ours - ref| <= ulps * ulp_dt + c * scale_i
 * (+ extra_i when extra is not NULL). Fails when the worst ratio |Δ| /
 * bound exceeds 1; returns it with the c the data needed and the max ULP
 * over all elements and over those where upper[i] (all when NULL). */
struct elem_check {
    const char *what;
    enum dtype dt;
    double ulps, c;
    const float *ours, *ref, *scale, *extra;
    const unsigned char *upper;
    size_t n;
};

struct elem_result {
    double worst;          /* max |Δ| / bound */
    size_t worst_i;
    double raw;            /* max (|Δ| - ulps ulp_dt - extra) / scale: the c this data needs */
    uint64_t ulp_upper;    /* max ULP over the upper region */
    uint64_t ulp_all;
};

struct elem_result elem_compare(const struct elem_check *k);

#endif
