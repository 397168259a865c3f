#include "codegen_rounding.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare.h"
#include "envelope.h"
#include "error.h"
#include "run_tensors.h"
#include "verdict.h"

int codegen_rounding_applies(const struct run_record *base, const struct run_record *run, const struct impl_result *res)
{
    double codegen = run_record_attr(run, "compile.codegen");
    return res->verdict == V_FAIL && res->outside_envelope && !run->outcome[0] &&
           (codegen == CODEGEN_INDUCTOR || codegen == CODEGEN_XLA) && run_record_attr(base, "compile.codegen") == codegen;
}

/* How a reason names the compiler and the twin of its rule. */
struct compiler_words {
    const char *name;  /* "Inductor's rounding" */
    const char *twin;  /* what <run>_graphs is */
};

static struct compiler_words words_of(const struct run_record *run)
{
    if (run_record_attr(run, "compile.codegen") == CODEGEN_XLA)
        return (struct compiler_words){"XLA", "the same HLO compiled without XLA's fusion"};
    return (struct compiler_words){"Inductor", "the same graphs run op by op"};
}

/* Where the samples stand against the compiler's rounding of the plain step. */
struct rounding {
    int outside;                 /* some tensor lies beyond its limit */
    char path[RUN_PATH_MAX];     /* the first such, or the nearest its limit */
    double distance, rho, ratio; /* of that tensor: scaled ULP from base, rho, distance / limit */
    double max_scaled;           /* over every differing tensor of every sample */
};

/* The scaled distance of b from a (0 when bitwise), both of their runs. */
static int distance_of(const struct run_record *ra, const struct run_tensor *a, const struct run_record *rb,
                       const struct run_tensor *b, double *out)
{
    *out = 0;
    if (run_tensors_same_object(ra, a, rb, b))
        return ST_OK;
    struct tensor_hold ha, hb;
    int st = run_tensor_acquire(ra, a, &ha);
    if (st)
        return st;
    if ((st = run_tensor_acquire(rb, b, &hb))) {
        run_tensor_release(&ha);
        return st;
    }
    if (!host_tensors_bitwise_equal(&ha.t, &hb.t)) {
        double d = compare_scaled_distance(&ha.t, &hb.t, NULL);
        *out = isnan(d) ? INFINITY : d;
    }
    run_tensor_release(&ha);
    run_tensor_release(&hb);
    return ST_OK;
}

static int measure(const struct run_record *base, const struct run_record *const *samples, int n_samples,
                   const struct run_record *graphs_base, struct rounding *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < base->n; i++) {
        const struct run_tensor *ref = &base->items[i], *g;
        if (!envelope_in_scope(ref->path))
            continue;
        double rho = INFINITY;
        int st;
        if ((g = run_record_find(graphs_base, ref->path)) && (st = distance_of(base, ref, graphs_base, g, &rho)))
            return error_wrap(st, "%s", ref->path);
        for (int k = 0; k < n_samples; k++) {
            const struct run_tensor *t = run_record_find(samples[k], ref->path);
            double d;
            if (!t)
                continue; /* a tensor on one side only is not outside_envelope: never here */
            if ((st = distance_of(base, ref, samples[k], t, &d)))
                return error_wrap(st, "%s", ref->path);
            if (d == 0)
                continue;
            double limit = JUDGE_NOISE_MARGIN * fmax(rho, 1.0), ratio = d / limit;
            if (d > out->max_scaled)
                out->max_scaled = d;
            int beyond = !(d <= limit);
            /* The first tensor beyond, else the one nearest its limit. */
            if ((beyond && !out->outside) || (!out->outside && (ratio > out->ratio || !out->path[0]))) {
                snprintf(out->path, sizeof out->path, "%s", ref->path);
                out->distance = d;
                out->rho = rho;
                out->ratio = ratio;
            }
            out->outside |= beyond;
        }
    }
    return ST_OK;
}


static const char *num(double v, char *buf, size_t len)
{
    snprintf(buf, len, isinf(v) || isnan(v) ? "inf" : "%.3g", v);
    return buf;
}

int codegen_rounding_judge(const struct run_record *base, const struct run_record *const *samples, int n_samples,
                           const struct run_record *twin, const struct impl_result *twin_res,
                           const struct run_record *graphs_base, struct impl_result *res)
{
    char a[32], b[32], c[32];
    struct compiler_words w = words_of(samples[0]);
    if (!twin || !graphs_base) {
        text_appendf(&res->reason, " [%s's rounding cannot be told apart: the report has no %s_graphs%s]", w.name,
                 samples[0]->name, twin ? "'s baselines" : "");
        return ST_OK;
    }
    double random = run_record_attr(samples[0], "compile.random_ops");
    /* The graphs run op by op draw what Inductor's kernels draw only where
     * compile_evidence.py reproduces their generator (CPU's Philox from the
     * same seeds): compile.random_unmatched 0 in both twins. */
    int drawn_alike = run_record_attr(twin, "compile.random_unmatched") == 0 &&
                      run_record_attr(graphs_base, "compile.random_unmatched") == 0;
    if (run_record_attr(samples[0], "compile.codegen") == CODEGEN_INDUCTOR && !(random == 0) && !drawn_alike) {
        text_appendf(&res->reason, " [not told apart from Inductor's rounding: its graphs draw random numbers (%s "
                 "op(s)), which Inductor's kernels draw from a generator of their own, not reproduced op by op "
                 "here (it is on CPU)]", num(random, a, sizeof a));
        return ST_OK;
    }
    if (twin_res->verdict != V_PASS) {
        text_appendf(&res->reason, "; not %s's rounding: %s (%s) differ%s from %s too (%s)", w.name, w.twin,
                 twin->name, strstr(w.twin, "graphs") ? "" : "s", graphs_base->name, verdict_name(twin_res->verdict));
        return ST_OK;
    }
    struct rounding r;
    int st = measure(base, samples, n_samples, graphs_base, &r);
    if (st)
        return st;
    if (r.outside) {
        text_appendf(&res->reason,
                 "; beyond %s's rounding: %s differs by %s scaled ULP, more than %gx max(rho, 1), rho = %s "
                 "scaled ULP being %s's own rounding of the plain step there (%s against %s)",
                 w.name, r.path, num(r.distance, a, sizeof a), JUDGE_NOISE_MARGIN, num(r.rho, b, sizeof b), w.name,
                 base->name, graphs_base->name);
        return ST_OK;
    }
    char attempts[80] = "";
    if (n_samples > 1)
        snprintf(attempts, sizeof attempts, " in all %d attempts", n_samples);
    res->verdict = V_NOISE;
    res->outside_envelope = 0;
    text_setf(&res->reason,
             "%s's rounding, not the checkpoint: %s (%s) %s bitwise identical to %s, and every tensor lies within "
             "%gx max(rho, 1) of %s%s, rho being %s's own rounding of the plain step (%s against %s): max scaled "
             "ULP %s; nearest its limit %s, %s scaled ULP, rho %s",
             w.name, w.twin, twin->name, strstr(w.twin, "graphs") ? "are" : "is", graphs_base->name,
             JUDGE_NOISE_MARGIN, base->name, attempts, w.name, base->name, graphs_base->name,
             num(r.max_scaled, a, sizeof a), r.path, num(r.distance, b, sizeof b), num(r.rho, c, sizeof c));
    if (random > 0) {
        text_appendf(&res->reason, "; its graphs' %s random op(s) drawn op by op as Inductor's kernels draw them "
                 "(the same Philox numbers from the same seeds)", num(random, a, sizeof a));
    }
    return ST_OK;
}
