#include "compile_evidence.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double attr(const struct run_record *r, const char *key) { return run_record_attr(r, key); }

static double or_zero(double v) { return isnan(v) ? 0 : v; }

static void append(struct impl_result *res, const char *text) { text_append(&res->reason, text); }

/* "(activation_memory_budget 1, CSE on, 2 graph break(s))" */
static void settings(const struct run_record *run, char *buf, size_t len)
{
    double budget = attr(run, "compile.activation_memory_budget"), cse = attr(run, "compile.cse");
    double breaks = or_zero(attr(run, "compile.graph_breaks"));
    char br[64] = "";
    if (breaks > 0)
        snprintf(br, sizeof br, ", %.0f graph break(s)", breaks);
    snprintf(buf, len, "activation_memory_budget %g, CSE %s%s", budget, cse == 1 ? "on" : isnan(cse) ? "?" : "off",
             br);
}

/* The graphs' saved tensors against what saved_tensors_hooks saw packed in
 * the same forward: a finding when they differ, with the likely cause. */
static void measured(const struct run_record *run, struct impl_result *res)
{
    double hooked = attr(run, "compile.hooked_saved_tensors"), hooked_bytes = attr(run, "compile.hooked_saved_bytes");
    double saved = or_zero(attr(run, "compile.saved_tensors")), bytes = or_zero(attr(run, "compile.saved_bytes"));
    if (isnan(hooked) || isnan(hooked_bytes) || (hooked == saved && hooked_bytes == bytes))
        return;
    text_appendf(&res->reason,
             " [finding: saved_tensors_hooks saw %.0f tensor(s) / %.0f bytes packed, the graphs save %.0f / %.0f: %s]",
             hooked, hooked_bytes, saved, bytes,
             hooked_bytes < bytes ? "hooks around the compiled code (a checkpoint) hold them"
                                  : "eager ops around the compiled code save their own");
}

static void judge_rules(const struct run_record *base, const struct run_record *run, struct impl_result *res)
{
    double regions = attr(run, "compile.ckpt_regions");
    if (isnan(regions) || run->outcome[0])
        return;
    double recomputed = or_zero(attr(run, "compile.ckpt_regions_recomputed"));
    double ops = or_zero(attr(run, "compile.recompute_ops"));
    double tensors = or_zero(attr(run, "compile.saved_activation_tensors"));
    double bytes = or_zero(attr(run, "compile.saved_activation_bytes"));
    double base_tensors = attr(base, "compile.saved_activation_tensors");
    double base_bytes = attr(base, "compile.saved_activation_bytes");
    int has_base = !isnan(base_bytes) && base != run;
    int judged_ok = res->verdict == V_PASS || res->verdict == V_NOISE;
    char set[160], cmp[200];
    settings(run, set, sizeof set);
    if (has_base)
        snprintf(cmp, sizeof cmp, "the compiled baseline's %.0f", base_bytes);
    else
        snprintf(cmp, sizeof cmp, "no compiled baseline to compare bytes with");
    double must_save = or_zero(attr(run, "compile.policy_must_save_ops"));
    double must_save_recomputed = or_zero(attr(run, "compile.policy_must_save_recomputed"));
    if (judged_ok && must_save_recomputed > 0) {
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right, but torch.compile's partitioner does not hold the checkpoint's policy: it "
                 "recomputes %.0f of the %.0f op(s) the policy marks MUST_SAVE (%.0f op(s) recomputed in %.0f of "
                 "%.0f checkpoint region(s); saved %.0f activation tensor(s) / %.0f bytes for backward, %s; %s)",
                 must_save_recomputed, must_save, ops, recomputed, regions, tensors, bytes, cmp, set);
        return;
    }
    if (judged_ok && regions > 0 && recomputed == 0) {
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right, but torch.compile saved %.0f activation tensor(s) / %.0f bytes for backward "
                 "(%s) and recomputed nothing: the recompute of %.0f of %.0f checkpoint region(s) was dropped by the "
                 "partitioner (%s)",
                 tensors, bytes, cmp, regions, regions, set);
    } else if (judged_ok && regions > 0 && has_base && bytes >= base_bytes) {
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason,
                 "gradients right, but torch.compile saved %.0f activation tensor(s) / %.0f bytes for backward, no "
                 "fewer than the compiled baseline's %.0f: the recompute of %.0f of %.0f checkpoint region(s) was "
                 "dropped by the partitioner, %.0f op(s) recomputed in the rest (%s)",
                 tensors, bytes, base_bytes, regions - recomputed, regions, ops, set);
    } else if (regions > 0) {
        char vs[160] = "";
        if (has_base)
            snprintf(vs, sizeof vs, ", compiled baseline %.0f / %.0f", or_zero(base_tensors), base_bytes);
        text_appendf(&res->reason,
                 "; torch.compile recomputed %.0f op(s) in %.0f of %.0f checkpoint region(s) and saved %.0f "
                 "activation tensor(s) / %.0f bytes for backward%s (%s)",
                 ops, recomputed, regions, tensors, bytes, vs, set);
        if (recomputed < regions) {
            text_appendf(&res->reason,
                     " [finding: the recompute of %.0f of %.0f checkpoint region(s) was dropped by torch.compile's "
                     "partitioner]",
                     regions - recomputed, regions);
        }
    } else {
        text_appendf(&res->reason,
                 "; torch.compile: no checkpoint region in its %.0f graph(s); %.0f activation tensor(s) / %.0f "
                 "bytes saved for backward (%s)",
                 or_zero(attr(run, "compile.regions")), tensors, bytes, set);
    }
}

/* What the memory meter measured beside the graphs' claim: the bytes held
 * at the end of the forward, the run's and its baseline's (the compiled
 * baseline, or the eager one for a _vs_eager twin). */
static void held(const struct run_record *base, const struct run_record *run, struct impl_result *res)
{
    double mine = attr(run, "memory.end_forward_bytes"), theirs = attr(base, "memory.end_forward_bytes");
    if (isnan(mine) || isnan(theirs) || base == run)
        return;
    text_appendf(&res->reason, "; end of forward held %.0f bytes (meter), %s %.0f", mine, base->name, theirs);
}

/* Compiled regions that ran without this evidence: said, never silent. */
static void unrecorded(const struct run_record *run, struct impl_result *res)
{
    double calls = attr(run, "compile.unrecorded_region_calls");
    if (isnan(calls) || calls <= 0)
        return;
    text_appendf(&res->reason,
             " [torch.compile: %.0f compiled region call(s) ran with a backend whose graphs are not read (only "
             "Inductor's, torch.compile's default, and aot_eager's are): what its partitioner saved and recomputed "
             "is not judged]",
             calls);
}

/* A checkpoint Dynamo traced with preserve_rng_state=False around random
 * ops: inside compiled code the partitioner saves a random op's output or
 * recomputes it from the seed it saved, so nothing new is drawn. */
static void rng_state(const struct run_record *run, struct impl_result *res)
{
    double regions = attr(run, "compile.ckpt_regions_without_rng_state");
    if (isnan(regions) || regions <= 0 || !(res->verdict == V_PASS || res->verdict == V_NOISE))
        return;
    text_appendf(&res->reason,
             " [preserve_rng_state=False in %.0f checkpoint region(s) that draw random numbers, inside compiled "
             "code: harmless, the partitioner saves each random op's output or recomputes it from the seed it "
             "saved, so the recompute draws no new numbers]",
             regions);
}

/* A compiled run judged against the eager baseline alone: its compiler's
 * rounding cannot be told apart from the checkpoint there. */
static void no_family(const struct run_record *base, const struct run_record *run, struct impl_result *res)
{
    int compiled = attr(run, "compile.codegen") == 1 || attr(run, "compile.unrecorded_region_calls") > 0;
    int base_compiled = !isnan(attr(base, "compile.codegen")) || !isnan(attr(base, "compile.unrecorded_region_calls"));
    if (!compiled || base_compiled || res->verdict != V_FAIL || run->twin_of[0])
        return;
    append(res, " [compiled, and judged against the eager baseline only: the compiler's rounding cannot be told "
                "apart from the checkpoint here; pass baselines={\"compiled\": Run(prepare=<the plain model compiled "
                "the same way>)} and Run(..., against=\"compiled\") (docs/compile.md)]");
}

void compile_evidence_judge(const struct run_record *base, const struct run_record *run, struct impl_result *res)
{
    if (!run->outcome[0]) {
        unrecorded(run, res);
        no_family(base, run, res);
    }
    if (isnan(attr(run, "compile.ckpt_regions")) || run->outcome[0])
        return;
    judge_rules(base, run, res);
    held(base, run, res);
    measured(run, res);
    rng_state(run, res);
}
