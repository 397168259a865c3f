/* What a selective policy saves, stated from its definition
 * (policy_statement.h): the ops each named policy keeps, the bytes a gpt
 * block keeps per op after Korthikanti et al., and the judgement of a run's
 * kept ops and held bytes against them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "case.h"
#include "policy.h"
#include "policy_statement.h"
#include "run_record.h"
#include "test_support.h"

#define BIT(op) POLICY_BIT(op)

static unsigned stated(const char *policy)
{
    unsigned keep;
    char why[160];
    assert_ok(policy_statement_ops(policy, &keep, why, sizeof why));
    return keep;
}

/* Megatron's selective recompute keeps the matmuls' outputs. */
static void save_matmuls_keeps_the_linear_layers_and_the_attention(void **state)
{
    (void)state;
    assert_int_equal(stated("save_matmuls"), BIT(POP_LINEAR) | BIT(POP_CAUSAL_ATTENTION));
}

/* Korthikanti's selective recompute recomputes the attention core only. */
static void attention_core_keeps_every_op_but_the_attention(void **state)
{
    (void)state;
    unsigned keep = stated("attention_core");
    assert_false(keep & BIT(POP_CAUSAL_ATTENTION));
    for (int op = 0; op < POP_COUNT; op++)
        if (op != POP_CAUSAL_ATTENTION)
            assert_true(keep & BIT(op));
}

static void save_list_keeps_exactly_the_ops_it_names(void **state)
{
    (void)state;
    assert_int_equal(stated("save:layer_norm, bias_dropout_add"), BIT(POP_LAYER_NORM) | BIT(POP_BIAS_DROPOUT_ADD));
    unsigned keep;
    char why[160];
    assert_int_equal(policy_statement_ops("save:matmul", &keep, why, sizeof why), ST_INPUT);
    assert_non_null(strstr(why, "'matmul'"));
    assert_int_equal(policy_statement_ops("keep_all", &keep, why, sizeof why), ST_INPUT);
}

static struct ckpt_case gpt_case(void)
{
    struct ckpt_case c;
    case_defaults(&c);
    c.model = MODEL_GPT_BLOCK;
    c.layers = 2;
    c.hidden = 32;
    c.seq = 8;
    c.batch = 4;
    c.heads = 4;
    c.dtype = DT_F32;
    c.dropout = 0.1;
    c.segments = 0;
    return c;
}

/* s·b·h = 1024 elements, a·s²·b = 1024, 4 bytes each, 2 layers each its own
 * segment: linear 7·sbh, attention 3·sbh + a·s²·b (Korthikanti's terms
 * without the attention dropout). */
static void a_gpt_block_keeping_the_matmuls_keeps_seven_plus_three_activations_and_the_scores(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    double bytes;
    char why[160];
    assert_ok(policy_statement_gpt_extra_bytes(&c, stated("save_matmuls"), &bytes, why, sizeof why));
    assert_true(bytes == 2 * (7 * 1024 + 3 * 1024 + 1024) * 4.0);
}

/* Where a layer starts no segment, the first norm's input is its own to keep. */
static void layer_norm_keeps_the_layer_input_where_no_segment_starts(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    double every, seg2;
    char why[160];
    c.layers = 4;
    assert_ok(policy_statement_gpt_extra_bytes(&c, BIT(POP_LAYER_NORM), &every, why, sizeof why));
    c.segments = 2; /* layers 0-1 checkpointed, 2-3 plain; layer 1 starts none */
    assert_ok(policy_statement_gpt_extra_bytes(&c, BIT(POP_LAYER_NORM), &seg2, why, sizeof why));
    assert_true(every == 4 * (1024 + 4 * 32) * 4.0);
    assert_true(seg2 == (2 * (1024 + 4 * 32) + 1024) * 4.0);
}

static void the_bytes_are_stated_for_the_gpt_block_without_autocast_only(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    double bytes;
    char why[160];
    c.autocast = AUTOCAST_BF16;
    assert_int_equal(policy_statement_gpt_extra_bytes(&c, BIT(POP_LINEAR), &bytes, why, sizeof why), ST_INPUT);
    c = gpt_case();
    c.model = MODEL_MLP;
    assert_int_equal(policy_statement_gpt_extra_bytes(&c, BIT(POP_LINEAR), &bytes, why, sizeof why), ST_INPUT);
}

/* ---- a run against the statement ----------------------------------------------- */

static void record(struct run_record *r, const char *name, unsigned packed, unsigned kept)
{
    run_record_init(r, name);
    run_record_set_attr(r, "selective.ops_packed", packed);
    run_record_set_attr(r, "selective.ops_kept", kept);
}

/* The wrong policy: save_matmuls keeping dropout, not the attention. */
static void a_run_keeping_an_op_its_policy_does_not_name_is_off_naming_both(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    snprintf(c.policy, sizeof c.policy, "save_matmuls");
    struct run_record r;
    unsigned packed = BIT(POP_LINEAR) | BIT(POP_CAUSAL_ATTENTION) | BIT(POP_BIAS_DROPOUT_ADD);
    record(&r, "selective", packed, BIT(POP_LINEAR) | BIT(POP_BIAS_DROPOUT_ADD));
    char why[512];
    assert_int_equal(policy_statement_check_run(&c, &r, "selective", why, sizeof why), HELD_OFF);
    assert_non_null(strstr(why, "kept from forward the saved tensors of [bias_dropout_add], which the policy does not "
                                "name, and recomputed those of [causal_attention], which it names"));
    run_record_free(&r);
}

/* The other direction alone: an op the policy names recomputed instead of
 * kept, nothing extra kept (the held-bytes check may not fire first). */
static void a_run_recomputing_an_op_its_policy_names_is_off_by_itself(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    snprintf(c.policy, sizeof c.policy, "save_matmuls");
    struct run_record r;
    record(&r, "selective", BIT(POP_LINEAR) | BIT(POP_CAUSAL_ATTENTION), BIT(POP_LINEAR));
    char why[512];
    assert_int_equal(policy_statement_check_run(&c, &r, "selective", why, sizeof why), HELD_OFF);
    assert_non_null(strstr(why, "selective recomputed the saved tensors of [causal_attention], which the policy names "
                                "and keeps (policy 'save_matmuls')"));
    run_record_free(&r);
}

/* A full recompute keeps nothing from forward, whatever the case's policy. */
static void a_full_recompute_that_keeps_anything_is_off(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    snprintf(c.policy, sizeof c.policy, "save_matmuls");
    struct run_record r;
    record(&r, "nonreentrant", BIT(POP_LINEAR) | BIT(POP_LAYER_NORM), BIT(POP_LAYER_NORM));
    char why[512];
    assert_int_equal(policy_statement_check_run(&c, &r, "nonreentrant", why, sizeof why), HELD_OFF);
    assert_non_null(strstr(why, "[layer_norm], which a full recompute keeps none of"));
    run_record_free(&r);
}

/* Held bytes: a full recompute's prediction plus the kept ops' statement. */
static void a_gpt_run_holding_other_bytes_than_its_policy_states_is_off(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    snprintf(c.policy, sizeof c.policy, "save_matmuls");
    struct run_record r;
    unsigned keep = BIT(POP_LINEAR) | BIT(POP_CAUSAL_ATTENTION);
    record(&r, "selective", keep | BIT(POP_LAYER_NORM), keep);
    double full = 30000, extra = 2 * (7 * 1024 + 3 * 1024 + 1024) * 4.0;
    run_record_set_attr(&r, "memory.predicted_checkpointed_end_forward_bytes", full);
    run_record_set_attr(&r, "memory.end_forward_bytes", full + extra);
    char why[512];
    assert_int_equal(policy_statement_check_run(&c, &r, "selective", why, sizeof why), HELD_MATCHES);
    run_record_set_attr(&r, "memory.end_forward_bytes", full + extra - 4);
    assert_int_equal(policy_statement_check_run(&c, &r, "selective", why, sizeof why), HELD_OFF);
    assert_non_null(strstr(why, "-4 bytes"));
    run_record_free(&r);
}

/* A run that packs nothing (reentrant, the baseline, another producer's) is not stated. */
static void a_run_that_records_no_packed_ops_is_not_judged(void **state)
{
    (void)state;
    struct ckpt_case c = gpt_case();
    struct run_record r;
    run_record_init(&r, "reentrant");
    char why[512];
    assert_int_equal(policy_statement_check_run(&c, &r, "reentrant", why, sizeof why), HELD_UNJUDGED);
    assert_string_equal(why, "");
    run_record_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(save_matmuls_keeps_the_linear_layers_and_the_attention),
        cmocka_unit_test(attention_core_keeps_every_op_but_the_attention),
        cmocka_unit_test(save_list_keeps_exactly_the_ops_it_names),
        cmocka_unit_test(a_gpt_block_keeping_the_matmuls_keeps_seven_plus_three_activations_and_the_scores),
        cmocka_unit_test(layer_norm_keeps_the_layer_input_where_no_segment_starts),
        cmocka_unit_test(the_bytes_are_stated_for_the_gpt_block_without_autocast_only),
        cmocka_unit_test(a_run_keeping_an_op_its_policy_does_not_name_is_off_naming_both),
        cmocka_unit_test(a_run_recomputing_an_op_its_policy_names_is_off_by_itself),
        cmocka_unit_test(a_full_recompute_that_keeps_anything_is_off),
        cmocka_unit_test(a_gpt_run_holding_other_bytes_than_its_policy_states_is_off),
        cmocka_unit_test(a_run_that_records_no_packed_ops_is_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
