/* compare: exact, per-tensor comparison of two host tensors — bitwise
 * equality, differing count, first differing index, sign-aware ULP distance
 * (float32, bfloat16, float16; float64 too), max abs/rel difference, NaN/Inf
 * counts with NaN bit patterns compared exactly — and the comparison of two
 * whole recorded runs in their recorded order. Integer and bool tensors
 * are compared as values (counts): their differences are never ULPs.
 * Pure C, no libtorch. */
#ifndef CKPT_COMPARE_H
#define CKPT_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "host_tensor.h"
#include "run_record.h"

/* ULP distance reported when one side is NaN and the other is not, or two
 * NaNs differ in their bits. Infinities are not special: +inf vs -inf is
 * their (large, finite) ordered distance. */
#define ULP_INFINITE UINT64_MAX

struct tensor_diff {
    int comparable;         /* 0: dtype or shape differ (reason in `why`) */
    char why[160];
    int bitwise_equal;      /* every byte identical (NaN payloads included) */
    size_t count;           /* elements compared */
    size_t n_differ;        /* elements whose bits differ */
    size_t first_index;     /* flat index of the first differing element */
    double first_a, first_b; /* the values there (as double) */
    /* int64, uint8 and bool: compared as values (counts). max_ulp is then 0
     * and max_value_diff their largest absolute difference. */
    int integer;
    uint64_t max_ulp;       /* max over elements; 0 when bitwise equal or integer */
    uint64_t max_value_diff; /* integer tensors: max |a - b| over elements */
    size_t max_ulp_index;   /* first element reaching max_ulp (max_value_diff for an integer tensor) */
    double max_abs, max_rel; /* over elements that are finite on both sides */
    size_t nan_a, nan_b, inf_a, inf_b; /* over all elements, equal or not */
};

/* Sign-aware distance in units in the last place: how many steps from one
 * representable value to the next separate a and b on the number line (1.0
 * and its successor are 1 apart; the smallest positive and negative subnormals are 2 apart).
 * +0 and -0 are 0 ULP apart but still count as differing bits. Two NaNs with
 * identical bits are 0 apart; any other pair involving NaN is ULP_INFINITE. */
uint64_t ulp_distance_f32(float a, float b);
uint64_t ulp_distance_f64(double a, double b);
uint64_t ulp_distance_bf16(uint16_t a, uint16_t b);
uint64_t ulp_distance_f16(uint16_t a, uint16_t b);
double bf16_to_double(uint16_t v);
double f16_to_double(uint16_t v);

/* "17", or "inf" for ULP_INFINITE (a NaN on one side), into buf: a raw
 * element-wise ULP distance. */
const char *ulp_format(uint64_t ulp, char *buf, size_t len);
/* "2.5", "1.5e+07" or "inf" (infinite or NaN): a distance in scaled ULP
 * (compare_scaled_distance), as every table, reason and plot prints it. */
const char *scaled_ulp_format(double v, char *buf, size_t len);

/* Fills *d for a vs b. Returns ST_OK; incomparable inputs are not an
 * error: d->comparable = 0 and d->why says why ("dtype float32 vs bfloat16",
 * "shape [2, 3] vs [3, 2]", both joined by "; "). ST_INTERNAL only for a
 * malformed tensor (unknown dtype, numel not matching shape, no data). */
int compare_tensors(const struct host_tensor *a, const struct host_tensor *b, struct tensor_diff *d);

/* Distance at the tensor's scale: max |ref - other| over the elements, in
 * units of one ULP of ref's dtype at max |ref| (an all-zero or subnormal
 * ref is scaled as if its magnitude were float32's smallest normal). Unlike
 * the element-wise ULP distance it does not explode for values that cross
 * zero, so it measures reduction-order noise at the size that matters.
 * 0 when bitwise equal or differing only in the sign of zeros; INFINITY
 * when the tensors are incomparable or a non-finite value differs. Integer
 * and bool tensors: the max absolute difference of their values, not a
 * ULP (compare_is_integer says which). *scale (may be NULL) gets
 * max |ref| over its finite elements. */
double compare_scaled_distance(const struct host_tensor *ref, const struct host_tensor *other, double *scale);

/* 1 for the dtypes compared as values (int64, uint8, bool): no ULP exists. */
int compare_is_integer(enum dtype d);

/* Summary of two runs, walked in a's recorded order. */
struct run_diff {
    int n_tensors;          /* tensors compared */
    int n_differ;           /* tensors not bitwise equal (incomparable included) */
    int n_missing;          /* in a but not b, or b but not a */
    char first_missing[160]; /* its path: a's first missing in a's order, else b's */
    uint64_t max_ulp;       /* over all comparable floating tensors */
    char max_ulp_path[160];
    int n_integer_differ;   /* integer and bool tensors whose values differ */
    uint64_t max_value_diff; /* over them: the largest difference of values */
    char max_value_path[160];
    double max_abs;
    /* The first tensor (recorded order) that is not bitwise equal; it may be
     * an incomparable pair (first.comparable == 0, first_index_str ""). */
    int has_divergence;
    char first_path[160];   /* e.g. "steps/1/grads/l0.bias" */
    struct tensor_diff first;
    char first_index_str[96]; /* "[3, 17]" */
    int incomparable;       /* some pair had differing dtype/shape */
    char incomparable_path[160];
    char incomparable_why[160];
    /* Input gradients (steps/<k>/input_grads/...) b computes and a does
     * not: a run that marks its own input as requiring grad computes one
     * more gradient than its baseline, which is no difference in what both
     * compute. Counted here, not in n_missing; one a holds and b lacks is
     * missing. */
    int n_input_grads_b_only;
    char first_input_grad_b_only[160];
};

/* Compares every tensor of a (the reference: a baseline) with the same path
 * in b (the run). With only_prefix NULL the paths under "steps/" and
 * "final_params/" are compared (an input gradient only b holds is counted
 * apart: n_input_grads_b_only); otherwise
 * exactly the paths starting with only_prefix (e.g. "steps/", "saved/").
 * Differences are results in *out, not errors: returns ST_OK, or ST_INTERNAL
 * for a malformed tensor. */
int compare_runs(const struct run_record *a, const struct run_record *b, const char *only_prefix,
                 struct run_diff *out);

#endif
