/* judge_fixture: runs built in memory for the judge's unit suites
 * (test_judge.c, test_judge_checks.c): a small layer's gradients, a loss
 * and a final parameter, with reduction-order noise of a known kind. */
#ifndef CKPT_JUDGE_FIXTURE_H
#define CKPT_JUDGE_FIXTURE_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "case.h"
#include "judge.h"
#include "kept_results.h"
#include "test_support.h"

#define N 64

/* Gradients of a small layer: a weight of ordinary size and a bias whose
 * elements sit near zero, where a racing reduction flips their sign. */
struct grads {
    float loss, weight[N], bias[N];
};

static inline void base_grads(struct grads *g)
{
    struct rng r = {42};
    g->loss = 0.75f;
    for (int i = 0; i < N; i++) {
        g->weight[i] = (float)rng_uniform(&r, -0.08, 0.08);
        g->bias[i] = (float)rng_uniform(&r, -0.05, 0.05);
    }
    g->weight[40] = 0.07f; /* the element a bug moves, of ordinary size */
    g->bias[3] = 1e-9f; /* near zero: noise flips its sign */
    g->bias[7] = -2e-9f;
}

static inline void add_f32(struct run_record *r, const char *path, const float *v, int n)
{
    struct host_tensor t;
    int64_t shape[1] = {n};
    assert_ok(host_tensor_alloc(&t, DT_F32, n == 1 ? 0 : 1, shape));
    memcpy(t.data, v, (size_t)n * sizeof *v);
    assert_ok(run_record_add(r, path, &t));
}

static inline void make_run(struct run_record *r, const char *name, const struct grads *g)
{
    run_record_init(r, name);
    add_f32(r, "steps/1/loss", &g->loss, 1);
    add_f32(r, "steps/1/grads/l0.bias", g->bias, N);
    add_f32(r, "steps/1/grads/l0.weight", g->weight, N);
    add_f32(r, "final_params/l0.weight", g->weight, N);
    run_record_set_attr(r, "memory.peak_bytes", 1000);
    run_record_set_attr(r, "timing.step_ms", 1.0);
}

/* Reduction-order noise of the kind a racing dbias makes: the near-zero
 * bias elements change sign, the others move by an ULP or two. */
static inline void add_noise(struct grads *g, int seed)
{
    g->bias[3] = -g->bias[3] * (1 + 0.1f * (float)seed);
    g->bias[7] = -g->bias[7];
    g->bias[10 + seed] = nextafterf(g->bias[10 + seed], 1.0f);
    g->weight[20 + seed] = nextafterf(g->weight[20 + seed], 1.0f);
}

struct fixture {
    struct ckpt_case c;
    struct run_record runs[8];
    int n;
};

static inline void add(struct fixture *f, const char *name, const struct grads *g) { make_run(&f->runs[f->n++], name, g); }

static inline void fixture_free(struct fixture *f)
{
    for (int i = 0; i < f->n; i++)
        run_record_free(&f->runs[i]);
}

static inline struct impl_result judge(struct fixture *f, const char *name)
{
    struct impl_result res;
    assert_ok(judge_run(&f->c, f->runs, f->n, name, &res));
    return keep_result(res); /* its texts freed with the group (kept_results.h) */
}

static inline void init(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    case_defaults(&f->c);
}

/* baseline_0 and baseline_1 of g: bitwise equal (noisy = 0) or apart by
 * one sample of reduction-order noise (noisy = 1). */
static inline void add_baselines(struct fixture *f, const struct grads *g, int noisy)
{
    struct grads b1 = *g;
    if (noisy)
        add_noise(&b1, 1);
    add(f, "baseline_0", g);
    add(f, "baseline_1", &b1);
}


#endif
