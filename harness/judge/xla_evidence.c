#include "xla_evidence.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double attr(const struct run_record *r, const char *key) { return run_record_attr(r, key); }

static void append(struct impl_result *res, const char *text) { text_append(&res->reason, text); }

/* "temp 1.00x baseline (a vs b bytes)", or the total when temps are absent. */
static void bytes_ratio(const struct run_record *base, const struct run_record *run, char *buf, size_t len,
                        double *ratio)
{
    double t = attr(run, "xla.temp_bytes"), bt = attr(base, "xla.temp_bytes");
    double total = attr(run, "xla.total_bytes"), btotal = attr(base, "xla.total_bytes");
    *ratio = NAN;
    if (bt > 0 && !isnan(t)) {
        *ratio = t / bt;
        snprintf(buf, len, "XLA temp buffers %.2fx baseline (%.0f vs %.0f bytes; total %.0f vs %.0f)", *ratio, t, bt,
                 total, btotal);
    } else if (btotal > 0 && !isnan(total)) {
        *ratio = total / btotal;
        snprintf(buf, len, "XLA buffers %.2fx baseline (%.0f vs %.0f bytes)", *ratio, total, btotal);
    } else {
        snprintf(buf, len, "XLA's bytes not recorded");
    }
}

void xla_evidence_judge(const struct run_record *base, const struct run_record *run, struct impl_result *res)
{
    double traced = attr(run, "xla.recompute_ops_unoptimized");
    if (isnan(traced) || run->outcome[0])
        return;
    double left = attr(run, "xla.recompute_ops_optimized"), regions = attr(run, "xla.regions");
    double merged = attr(run, "xla.regions_merged"), other = attr(run, "xla.barrier_other_values");
    double other_bytes = attr(run, "xla.barrier_other_bytes"), inputs = attr(run, "xla.barrier_recompute_inputs");
    double ops = attr(run, "xla.ops_optimized"), base_ops = attr(base, "xla.ops_optimized");
    char bytes[200];
    double ratio;
    bytes_ratio(base, run, bytes, sizeof bytes, &ratio);
    int judged_ok = res->verdict == V_PASS || res->verdict == V_NOISE;
    if (judged_ok && traced > 0 && merged > 0) {
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right, but the recompute of %.0f of %.0f region(s) was merged into the forward by XLA "
                 "(CSE): %.0f recompute op(s) traced, %.0f left after optimization; %s",
                 merged, regions, traced, left, bytes);
    } else if (judged_ok && traced > 0 && !isnan(ratio) && ratio >= 1.0 && !isnan(ops) && !isnan(base_ops) &&
               ops <= base_ops) {
        /* Regions not told apart after optimization (JAX), or a few replayed
         * ops with no forward twin left: the compiled step is no bigger than
         * the plain one, so the recompute went into the forward's ops. */
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right, but XLA merged the recompute of %.0f region(s) into the forward (CSE): the "
                 "optimized step has %.0f instructions, no more than the plain baseline's %.0f (%.0f recompute "
                 "op(s) traced, %.0f still marked after optimization); %s",
                 regions, ops, base_ops, traced, left, bytes);
    } else if (judged_ok && traced > 0 && !isnan(ratio) && ratio >= 1.0) {
        double early = attr(run, "xla.regions_scheduled_early"), barriers = attr(run, "xla.barriers");
        double kept = attr(run, "xla.barriers_optimized");
        char sched[200] = "";
        if (early > 0)
            snprintf(sched, sizeof sched,
                     "; XLA scheduled the recompute of %.0f region(s) ahead of the backward that makes its incoming "
                     "gradient (opt-barriers: %.0f before optimization, %.0f after)",
                     early, isnan(barriers) ? 0 : barriers, isnan(kept) ? 0 : kept);
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right and the recompute survives XLA's optimization (%.0f op(s) marked as recompute "
                 "after it, %.0f traced), but nothing is saved: %s%s",
                 left, traced, bytes, sched);
    } else if (judged_ok && traced > 0) {
        /* Two counts, not a fraction: the optimized program can mark more
         * ops than were traced (XLA splits and copies ops into fusions). */
        text_appendf(&res->reason,
                 "; recompute kept by XLA in %.0f region(s): %.0f op(s) marked as recompute after optimization, "
                 "%.0f traced, %s",
                 regions, left, traced, bytes);
    }
    if (attr(run, "xla.graph_hash_as_baseline") == 1)
        append(res, " [finding: torch_xla's graph hash of this step equals the plain baseline's: in one process its "
                    "compilation cache would run the baseline's program, recompute dropped; each run here is salted to "
                    "compile its own]");
    if (other > 0) {
        text_appendf(&res->reason,
                 " [finding: opt-barriers beyond the recompute inputs: %.0f held value(s) no recompute op reads "
                 "(%.0f recompute input(s) besides), %.0f bytes kept live up to the barrier]",
                 other, isnan(inputs) ? 0 : inputs, other_bytes);
    }
}
