/* Memory accounting: segment plans as checkpoint_sequential cuts them, the
 * saved-bytes prediction against hand-counted formulas, and against what
 * the counting allocator measures at the end of forward for every model,
 * fusion, dtype / autocast, dropout and segmenting, for the baseline and
 * both reference checkpoints (exact to the byte on the CPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "case.h"
#include "error.h"
#include "model.h"
#include "runner.h"

/* ---- plans ----------------------------------------------------------------- */

static void test_plan_every_checkpoints_each_layer(void **state)
{
    (void)state;
    struct segment_plan p;
    segment_plan_make(&p, 16, 0);
    assert_int_equal(p.size, 1);
    assert_int_equal(p.count, 16);
    assert_int_equal(p.plain_from, 16);
}

static void test_plan_sequential_leaves_the_last_segment_plain(void **state)
{
    (void)state;
    struct segment_plan p;
    segment_plan_make(&p, 16, 4);
    assert_int_equal(p.size, 4);
    assert_int_equal(p.count, 3);
    assert_int_equal(p.plain_from, 12);
    /* 16 / 5 = 3: four segments of 3 checkpointed, layers 12..15 plain */
    segment_plan_make(&p, 16, 5);
    assert_int_equal(p.size, 3);
    assert_int_equal(p.count, 4);
    assert_int_equal(p.plain_from, 12);
    /* one segment: checkpoint_sequential runs it plainly */
    segment_plan_make(&p, 16, 1);
    assert_int_equal(p.count, 0);
    assert_int_equal(p.plain_from, 0);
    segment_plan_make(&p, 16, SEGMENTS_NONE);
    assert_int_equal(p.count, 0);
    assert_int_equal(p.plain_from, 0);
}

/* ---- the prediction against hand counts ------------------------------------ */

static struct ckpt_case mlp_case(int layers, int hidden, int seq, int batch, double dropout)
{
    struct ckpt_case c;
    case_defaults(&c);
    c.model = MODEL_MLP;
    c.layers = layers;
    c.hidden = hidden;
    c.seq = seq;
    c.batch = batch;
    c.dropout = dropout;
    return c;
}

static int64_t predict(const struct ckpt_case *c, int segments)
{
    struct model m;
    assert_int_equal(model_create(&m, c, DEVICE_CPU), ST_OK);
    struct segment_plan p;
    segment_plan_make(&p, c->layers, segments);
    int64_t bytes = model_predict_saved_bytes(&m, &p);
    model_free(&m);
    return bytes;
}

/* mlp, float32, p > 0. U = one activation. Per layer: the linear's output
 * (saved by gelu) and the dropout mask, plus the layer's output (saved by
 * the next linear, or by the loss for the last); the input x is not new;
 * the loss's result keeps one activation of storage. */
static void test_mlp_baseline_is_3L_plus_1_activations(void **state)
{
    (void)state;
    struct ckpt_case c = mlp_case(16, 64, 8, 4, 0.1);
    int64_t u = 4 * 8 * 64 * 4;
    assert_int_equal(predict(&c, SEGMENTS_NONE), (3 * 16 + 1) * u);
    /* every layer checkpointed: the 15 inputs after x, the last output, the loss */
    assert_int_equal(predict(&c, 0), (16 + 1) * u);
    /* 4 segments: inputs of segments 2 and 3, then 4 plain layers (input
     * kept, 2 each inside, 3 outputs kept by the next), the last output, the loss */
    assert_int_equal(predict(&c, 4), (2 + 1 + 4 * 2 + 3 + 1 + 1) * u);
    /* dropout 0 draws no mask and returns gelu's output itself */
    c.dropout = 0;
    assert_int_equal(predict(&c, SEGMENTS_NONE), (2 * 16 + 1) * u);
}

/* Under bf16 autocast the linear saves a bf16 cast of x (layer 0 only: the
 * later inputs are bf16 already) and of each weight; activations are bf16;
 * the loss casts the last one back to float32 and saves that. */
static void test_mlp_autocast_counts_the_casts(void **state)
{
    (void)state;
    struct ckpt_case c = mlp_case(4, 32, 4, 2, 0.1);
    c.autocast = AUTOCAST_BF16;
    int64_t u16 = 2 * 4 * 32 * 2, u32 = 2 * 4 * 32 * 4, w16 = 32 * 32 * 2;
    int64_t want = u16 + 4 * (w16 + 2 * u16) + 3 * u16 + 2 * u32;
    assert_int_equal(predict(&c, SEGMENTS_NONE), want);
}

/* ---- the prediction against the counting allocator ------------------------ */

struct variant {
    enum model_kind model;
    enum fusion_kind fusion;
    enum dtype dtype;
    enum autocast_kind autocast;
    double dropout;
    int segments;
    const char *policy; /* NULL: no selective run */
};

static void check_case(const struct variant *v, const char *out_dir)
{
    struct ckpt_case c;
    case_defaults(&c);
    snprintf(c.name, sizeof c.name, "memory_m%d_f%d_d%d_a%d_p%g_s%d_%s", v->model, v->fusion, v->dtype,
             v->autocast, v->dropout, v->segments, v->policy ? v->policy : "");
    c.model = v->model;
    c.fusion = v->fusion;
    c.dtype = v->dtype;
    c.autocast = v->autocast;
    c.dropout = v->dropout;
    c.segments = v->segments;
    c.layers = 4;
    c.hidden = 16;
    c.heads = 2;
    c.seq = 4;
    c.batch = 2;
    c.steps = 1;
    c.noise_runs = 0;
    c.n_impls = 2;
    snprintf(c.impls[0], sizeof c.impls[0], "reentrant");
    snprintf(c.impls[1], sizeof c.impls[1], "nonreentrant");
    if (v->policy) {
        c.n_impls = 3;
        snprintf(c.impls[2], sizeof c.impls[2], "selective");
        snprintf(c.policy, sizeof c.policy, "%s", v->policy);
    }
    struct run_settings s = {.out_dir = out_dir, .git_rev = "test", .harness_version = "test", .skip_h5 = 1};
    struct case_result *res = malloc(sizeof *res);
    assert_non_null(res);
    int st = runner_run_case(&c, &s, res);
    struct case_result r = *res;
    free(res);
    if (st)
        fail_msg("%s: %s", c.name, error_message());
    if (r.baseline_end_forward_bytes != r.predicted_baseline_end_forward_bytes)
        fail_msg("%s: baseline held %.0f bytes at the end of forward, predicted %.0f", c.name,
                 r.baseline_end_forward_bytes, r.predicted_baseline_end_forward_bytes);
    for (int i = 0; i < r.n_results; i++) {
        const struct impl_result *x = &r.results[i];
        if (x->verdict != V_PASS && x->verdict != V_NOISE)
            fail_msg("%s: %s is %s: %s", c.name, x->impl, verdict_name(x->verdict), text_str(&x->reason));
        if (x->end_forward_bytes != x->predicted_end_forward_bytes)
            fail_msg("%s: %s held %.0f bytes at the end of forward, predicted %.0f", c.name, x->impl,
                     x->end_forward_bytes, x->predicted_end_forward_bytes);
    }
    assert_string_equal(r.h5_path, ""); /* skip_h5: no file */
    case_result_free(&r);
}

static void test_prediction_is_exact_for_every_model_and_segmenting(void **state)
{
    (void)state;
    static const enum model_kind models[] = {MODEL_MLP, MODEL_GPT_BLOCK, MODEL_BRANCHY, MODEL_RRELU_MLP,
                                             MODEL_TWO_STREAM};
    static const enum fusion_kind fusions[] = {FUSION_NONE, FUSION_BIAS_GELU};
    static const struct {
        enum dtype dtype;
        enum autocast_kind autocast;
    } types[] = {{DT_F32, AUTOCAST_OFF}, {DT_F32, AUTOCAST_BF16}, {DT_BF16, AUTOCAST_BF16}};
    static const double dropouts[] = {0.1, 0.0};
    static const int segments[] = {0, 2};
    int checked = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++)
        for (size_t f = 0; f < sizeof fusions / sizeof *fusions; f++)
            for (size_t t = 0; t < sizeof types / sizeof *types; t++)
                for (size_t d = 0; d < sizeof dropouts / sizeof *dropouts; d++)
                    for (size_t k = 0; k < sizeof segments / sizeof *segments; k++) {
                        if (models[m] == MODEL_RRELU_MLP && fusions[f] != FUSION_NONE)
                            continue; /* rrelu_mlp has no bias-GELU to fuse */
                        struct variant v = {models[m], fusions[f], types[t].dtype, types[t].autocast,
                                            dropouts[d], segments[k], NULL};
                        check_case(&v, "/nonexistent");
                        checked++;
                    }
    assert_true(checked > 60);
}

/* Selective checkpointing: what each policy keeps, predicted to the byte,
 * on every model, fusion, dtype/autocast and segmenting. */
static void test_selective_prediction_is_exact_for_every_model_and_policy(void **state)
{
    (void)state;
    static const enum model_kind models[] = {MODEL_MLP, MODEL_GPT_BLOCK, MODEL_BRANCHY, MODEL_RRELU_MLP,
                                             MODEL_TWO_STREAM};
    static const enum fusion_kind fusions[] = {FUSION_NONE, FUSION_BIAS_GELU};
    static const struct {
        enum dtype dtype;
        enum autocast_kind autocast;
    } types[] = {{DT_F32, AUTOCAST_OFF}, {DT_F32, AUTOCAST_BF16}};
    static const int segments[] = {0, 2};
    int checked = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        const char *policies[3] = {"save_matmuls", "save:dropout", NULL};
        if (models[m] == MODEL_GPT_BLOCK) {
            policies[1] = "attention_core";
            policies[2] = "save:layer_norm,bias_dropout_add";
        } else if (models[m] == MODEL_RRELU_MLP) {
            policies[2] = "save:rrelu";
        }
        for (size_t f = 0; f < sizeof fusions / sizeof *fusions; f++)
            for (size_t t = 0; t < sizeof types / sizeof *types; t++)
                for (size_t k = 0; k < sizeof segments / sizeof *segments; k++)
                    for (size_t p = 0; p < 3 && policies[p]; p++) {
                        if (models[m] == MODEL_RRELU_MLP && fusions[f] != FUSION_NONE)
                            continue;
                        struct variant v = {models[m], fusions[f], types[t].dtype, types[t].autocast, 0.1,
                                            segments[k], policies[p]};
                        check_case(&v, "/nonexistent");
                        checked++;
                    }
    }
    assert_true(checked > 40);
}

/* The models with buffers (float32, unfused, no autocast): each checkpoint
 * also holds its copy of the buffers until backward, predicted to the byte
 * for the full and the selective references. */
static void test_prediction_is_exact_for_the_models_with_state(void **state)
{
    (void)state;
    static const enum model_kind models[] = {MODEL_BN_MLP, MODEL_SCALED_MLP};
    static const double dropouts[] = {0.1, 0.0};
    static const int segments[] = {0, 2};
    static const char *const policies[] = {NULL, "save_matmuls", "save:dropout"};
    int checked = 0;
    for (size_t m = 0; m < 2; m++)
        for (size_t d = 0; d < 2; d++)
            for (size_t k = 0; k < 2; k++)
                for (size_t p = 0; p < 3; p++) {
                    struct variant v = {models[m], FUSION_NONE, DT_F32, AUTOCAST_OFF, dropouts[d], segments[k],
                                        policies[p]};
                    check_case(&v, "/nonexistent");
                    checked++;
                }
    assert_int_equal(checked, 24);
}

int main(void)
{
    if (aten_init() != ST_OK) {
        fprintf(stderr, "aten_init: %s\n", error_message());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_every_checkpoints_each_layer),
        cmocka_unit_test(test_plan_sequential_leaves_the_last_segment_plain),
        cmocka_unit_test(test_mlp_baseline_is_3L_plus_1_activations),
        cmocka_unit_test(test_mlp_autocast_counts_the_casts),
        cmocka_unit_test(test_prediction_is_exact_for_every_model_and_segmenting),
        cmocka_unit_test(test_selective_prediction_is_exact_for_every_model_and_policy),
        cmocka_unit_test(test_prediction_is_exact_for_the_models_with_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
