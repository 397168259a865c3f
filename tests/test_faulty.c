/* The planted bugs' bookkeeping: every one is registered after the
 * references under its documented name, is not a reference, and its
 * observability rule says "cannot show" exactly where cases/mutation.ini
 * relies on it (and why), and first_call_kernel's mutation is exactly the
 * documented one, made through tensor ops. Whether each is caught is the
 * mutation suite's job (tests/mutation.cmake). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "case.h"
#include "error.h"
#include "faulty/faulty.h"
#include "impl.h"
#include "ops.h"
#include "services.h"

static const char *const planted[] = {
    "no_rng_stash",          "no_rng_stash_nr",          "rng_not_forked",
    "args_only_rng",         "autocast_not_restored",    "autocast_not_restored_nr",
    "counter_reset",         "recompute_elided",         "stale_input",
    "first_call_kernel",     "policy_ignored",           "stale_cache",
    "mutated_saved_output",  "rng_op_saved_without_replay", "state_double_update",
    "scale_not_restored",    "amax_updated_in_recompute", "hook_fires_twice",
    "leaked_recompute_frame", "attention_swapped_for_dropout",
};
#define N_PLANTED (sizeof planted / sizeof *planted)

static void test_planted_bugs_follow_the_references(void **state)
{
    (void)state;
    const struct checkpoint_impl *const *all = impl_all();
    size_t n = 0, first_planted = 0;
    for (; all[n]; n++)
        if (!all[n]->is_reference && !first_planted)
            first_planted = n;
    assert_int_equal(first_planted, 4); /* none, reentrant, nonreentrant, selective */
    assert_int_equal(n, 4 + N_PLANTED);
    for (size_t i = 0; i < N_PLANTED; i++) {
        const struct checkpoint_impl *impl = impl_find(planted[i]);
        assert_non_null(impl);
        assert_false(impl->is_reference);
        assert_non_null(impl->observable);
        assert_non_null(strstr(impl->summary, "planted bug"));
    }
}

/* How many services the table `replaced` changes from the reference's. */
static int services_replaced(const struct checkpoint_services *replaced)
{
    struct checkpoint_services s;
    checkpoint_services_resolve(&s, replaced);
    const struct checkpoint_services *r = &checkpoint_services_reference;
    return (s.rng_devices != r->rng_devices) + (s.rng_replay != r->rng_replay) +
           (s.rng_replay_needed != r->rng_replay_needed) + (s.autocast_replay != r->autocast_replay) +
           (s.state_replay != r->state_replay) + (s.nested_backward != r->nested_backward) +
           (s.policy_keeps != r->policy_keeps) + (s.keep_forward != r->keep_forward) +
           (s.take_kept != r->take_kept) + (s.count_unpack != r->count_unpack) +
           (s.cache_lookup != r->cache_lookup) + (s.cache_unchanged != r->cache_unchanged) +
           (s.forward_done != r->forward_done) + (s.recompute_done != r->recompute_done);
}

/* The references run on the reference services; every planted bug but the
 * two that wrap the run replaces one service (recompute_elided's store and
 * mutated_saved_output's cache guard are each one service with two ends). */
static void test_planted_bugs_replace_one_service_of_a_reference(void **state)
{
    (void)state;
    assert_int_equal(services_replaced(NULL), 0);
    const char *references[] = {"none", "reentrant", "nonreentrant", "selective"};
    for (size_t i = 0; i < sizeof references / sizeof *references; i++)
        assert_null(impl_find(references[i])->services);
    for (size_t i = 0; i < N_PLANTED; i++) {
        const struct checkpoint_impl *impl = impl_find(planted[i]);
        int n = services_replaced(impl->services);
        if (!strcmp(planted[i], "stale_input") || !strcmp(planted[i], "first_call_kernel"))
            assert_int_equal(n, 0);
        else if (!strcmp(planted[i], "recompute_elided") || !strcmp(planted[i], "mutated_saved_output"))
            assert_int_equal(n, 2);
        else if (n != 1)
            fail_msg("%s replaces %d services", planted[i], n);
    }
}

static int observable(const char *impl, const struct ckpt_case *c, char *why)
{
    why[0] = '\0';
    return impl_find(impl)->observable(c, why, 200);
}

static void test_rng_bugs_need_something_random_to_replay(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    c.dropout = 0.1;
    assert_true(observable("no_rng_stash", &c, why));
    assert_true(observable("rng_not_forked", &c, why));
    c.dropout = 0;
    assert_false(observable("no_rng_stash_nr", &c, why));
    assert_non_null(strstr(why, "dropout = 0"));
    c.model = MODEL_RRELU_MLP; /* RReLU draws even without dropout */
    assert_true(observable("no_rng_stash", &c, why));
    c.steps = 1; /* the leaked stream shows only in a later step */
    assert_true(observable("no_rng_stash", &c, why));
    assert_false(observable("rng_not_forked", &c, why));
    c.steps = 2;
    c.segments = 1; /* nothing checkpointed */
    assert_false(observable("no_rng_stash", &c, why));
    assert_non_null(strstr(why, "segments = 1"));
}

static void test_selective_bugs_show_only_where_the_policy_gives_them_room(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    c.model = MODEL_GPT_BLOCK;
    snprintf(c.policy, sizeof c.policy, "attention_core");
    /* attention_core keeps every op after the attention: nothing recomputed
     * follows a dropout */
    assert_false(observable("rng_op_saved_without_replay", &c, why));
    assert_non_null(strstr(why, "nothing recomputed comes after a random op"));
    snprintf(c.policy, sizeof c.policy, "save:bias_dropout_add");
    assert_true(observable("rng_op_saved_without_replay", &c, why));
    snprintf(c.policy, sizeof c.policy, "save:linear");
    assert_false(observable("rng_op_saved_without_replay", &c, why));
    assert_non_null(strstr(why, "keeps no random op"));
    /* four linears a block: another invocation to mistake */
    assert_true(observable("stale_cache", &c, why));
    snprintf(c.policy, sizeof c.policy, "save:causal_attention");
    assert_false(observable("stale_cache", &c, why)); /* one attention per layer, one layer per segment */
    c.segments = 2;
    assert_true(observable("stale_cache", &c, why));
    assert_true(observable("mutated_saved_output", &c, why));
    /* held bytes are judged against the policy's prediction everywhere */
    assert_true(observable("policy_ignored", &c, why));
    snprintf(c.policy, sizeof c.policy, "save:linear");
    assert_false(observable("attention_swapped_for_dropout", &c, why)); /* keeps neither */
    snprintf(c.policy, sizeof c.policy, "save_matmuls");
    assert_true(observable("attention_swapped_for_dropout", &c, why));
    snprintf(c.policy, sizeof c.policy, "attention_core");
    assert_true(observable("attention_swapped_for_dropout", &c, why));
    snprintf(c.policy, sizeof c.policy, "save:causal_attention");
    c.model = MODEL_MLP;
    c.dropout = 0;
    snprintf(c.policy, sizeof c.policy, "save:dropout");
    assert_false(observable("mutated_saved_output", &c, why)); /* p = 0: dropout records no node */
}

static void test_state_bugs_need_buffers_and_a_wrong_read_needs_a_model_that_reads_them(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    assert_false(observable("state_double_update", &c, why));
    assert_non_null(strstr(why, "model mlp has no buffers"));
    c.model = MODEL_BN_MLP;
    assert_true(observable("state_double_update", &c, why));
    assert_true(observable("amax_updated_in_recompute", &c, why));
    assert_false(observable("scale_not_restored", &c, why)); /* batch norm in training reads no state */
    assert_non_null(strstr(why, "reads no state"));
    c.model = MODEL_SCALED_MLP;
    assert_true(observable("scale_not_restored", &c, why));
    c.segments = 1;
    assert_false(observable("scale_not_restored", &c, why));
    assert_non_null(strstr(why, "segments = 1"));
}

static void test_args_only_rng_shows_only_where_segments_draw_off_their_arguments_device(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    assert_false(observable("args_only_rng", &c, why));
    assert_non_null(strstr(why, "CPU case"));
    snprintf(c.draw_device, sizeof c.draw_device, "cuda:0");
    assert_true(observable("args_only_rng", &c, why));
    snprintf(c.device, sizeof c.device, "cuda");
    assert_false(observable("args_only_rng", &c, why)); /* cuda is cuda:0 */
    assert_non_null(strstr(why, "draw_device"));
    snprintf(c.device, sizeof c.device, "cpu");
    c.dropout = 0;
    assert_false(observable("args_only_rng", &c, why));
    assert_non_null(strstr(why, "dropout = 0"));
}

static void test_rules_of_the_other_bugs(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    assert_false(observable("autocast_not_restored", &c, why));
    c.autocast = AUTOCAST_BF16;
    assert_true(observable("autocast_not_restored_nr", &c, why));
    assert_false(observable("first_call_kernel", &c, why));
    assert_non_null(strstr(why, "fusion none"));
    c.fusion = FUSION_BIAS_GELU;
    assert_true(observable("first_call_kernel", &c, why));
    /* held bytes are judged against the prediction wherever something is checkpointed */
    assert_true(observable("recompute_elided", &c, why));
    int segments = c.segments;
    c.segments = 1;
    assert_false(observable("recompute_elided", &c, why));
    c.segments = segments;
    c.dropout = 0;
    assert_true(observable("counter_reset", &c, why));
    assert_true(observable("stale_input", &c, why));
}

static void test_hook_fires_twice_needs_a_reentrant_checkpoint_that_records_a_backward(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    c.dropout = 0; /* nothing random needed: the hook count shows it */
    assert_true(observable("hook_fires_twice", &c, why));
    c.input_requires_grad = 0;
    assert_false(observable("hook_fires_twice", &c, why));
    assert_non_null(strstr(why, "input_requires_grad = false"));
    c.input_requires_grad = 1;
    c.segments = 1;
    assert_false(observable("hook_fires_twice", &c, why));
    assert_non_null(strstr(why, "segments = 1"));
}

static void test_leaked_recompute_frame_needs_a_second_step(void **state)
{
    (void)state;
    struct ckpt_case c;
    char why[200];
    case_defaults(&c);
    c.dropout = 0;
    assert_true(observable("leaked_recompute_frame", &c, why));
    c.steps = 1;
    assert_false(observable("leaked_recompute_frame", &c, why));
    assert_non_null(strstr(why, "steps = 1"));
}

/* The planted-bug matrix as the shipped cases declare it: each planted bug
 * is expected to be caught (FAIL or MEMFAIL, nothing else allowed) in at
 * least two cases; the suites then hold every verdict to its expectation.
 * (args_only_rng is caught only where a segment draws on a GPU: gpu.ini.) */
static void test_every_planted_bug_is_expected_caught_in_at_least_two_shipped_cases(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(case_list_load(&list, CKPT_SOURCE_DIR "/cases"), ST_OK);
    const unsigned caught = (1u << V_FAIL) | (1u << V_MEMFAIL);
    for (size_t b = 0; b < N_PLANTED; b++) {
        int cases = 0;
        for (int i = 0; i < list.count; i++) {
            const struct ckpt_case *c = &list.items[i];
            int runs = 0;
            for (int k = 0; k < c->n_impls; k++)
                runs |= strcmp(c->impls[k], planted[b]) == 0;
            unsigned mask = case_expected_mask(c, planted[b]);
            cases += runs && mask && !(mask & ~caught);
        }
        if (cases < 2)
            fail_msg("planted bug %s is expected caught in %d shipped case(s); at least 2", planted[b], cases);
    }
    case_list_free(&list);
}

/* ---- first_call_kernel's mutation, through the impl -------------------------- */

static int fused_segment(void *ctx, struct var *in, struct var **out)
{
    return op_bias_gelu_fused(out, in, ctx, FUSED_DETERMINISTIC);
}

static struct var *leaf(const int64_t *shape, int ndim, uint64_t seed)
{
    tensor *t = NULL;
    assert_int_equal(aten_rng_manual_seed(DEVICE_CPU, seed), ST_OK);
    assert_int_equal(tensor_randn(&t, DT_F32, ndim, shape, DEVICE_CPU, 1.0), ST_OK);
    struct var *v = NULL;
    assert_int_equal(var_leaf(&v, t, 1, "leaf"), ST_OK);
    return v;
}

static void host_bits(const struct var *v, uint32_t *bits, size_t n)
{
    struct host_tensor h;
    assert_int_equal(tensor_to_host(v->data, &h), ST_OK);
    assert_int_equal(h.numel, n);
    memcpy(bits, h.data, n * sizeof *bits);
    host_tensor_free(&h);
}

/* The run's first checkpointed forward hands out the fused output with the
 * lowest mantissa bit of every finite, nonzero element flipped, and nothing
 * else changed; its later checkpoints are untouched. The expectation is
 * computed on the host from the plain impl's output, independently of the
 * tensor op the bug uses. */
static void test_first_call_kernel_flips_the_last_bit_of_the_first_fused_output_only(void **state)
{
    (void)state;
    assert_int_equal(aten_init(), ST_OK);
    const int64_t xs[2] = {3, 5}, bs[1] = {5};
    struct var *x = leaf(xs, 2, 1), *b = leaf(bs, 1, 2), *plain = NULL, *cold = NULL, *warm = NULL;
    struct segment_fn seg = {.call = fused_segment, .ctx = b};
    struct impl_stats stats = {0};
    struct impl_options opts = {.preserve_rng_state = 1, .current_device = DEVICE_CPU, .stats = &stats};
    const struct checkpoint_impl *bug = impl_find("first_call_kernel");
    assert_int_equal(impl_find("none")->run(impl_find("none"), &opts, &seg, &x, &plain), ST_OK);
    stats.checkpoints = 0;
    assert_int_equal(bug->run(bug, &opts, &seg, &x, &cold), ST_OK);
    assert_int_equal(bug->run(bug, &opts, &seg, &x, &warm), ST_OK);
    uint32_t want[15], got_cold[15], got_warm[15];
    host_bits(plain, want, 15);
    host_bits(cold, got_cold, 15);
    host_bits(warm, got_warm, 15);
    assert_memory_equal(got_warm, want, sizeof want);
    for (int i = 0; i < 15; i++) {
        int finite_nonzero = (want[i] & 0x7f800000u) != 0x7f800000u && (want[i] & 0x7fffffffu) != 0;
        assert_int_equal(got_cold[i], finite_nonzero ? want[i] ^ 1u : want[i]);
    }
    var_release(plain);
    var_release(cold);
    var_release(warm);
    var_release(x);
    var_release(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_bugs_follow_the_references),
        cmocka_unit_test(test_planted_bugs_replace_one_service_of_a_reference),
        cmocka_unit_test(test_rng_bugs_need_something_random_to_replay),
        cmocka_unit_test(test_args_only_rng_shows_only_where_segments_draw_off_their_arguments_device),
        cmocka_unit_test(test_state_bugs_need_buffers_and_a_wrong_read_needs_a_model_that_reads_them),
        cmocka_unit_test(test_rules_of_the_other_bugs),
        cmocka_unit_test(test_selective_bugs_show_only_where_the_policy_gives_them_room),
        cmocka_unit_test(test_hook_fires_twice_needs_a_reentrant_checkpoint_that_records_a_backward),
        cmocka_unit_test(test_leaked_recompute_frame_needs_a_second_step),
        cmocka_unit_test(test_every_planted_bug_is_expected_caught_in_at_least_two_shipped_cases),
        cmocka_unit_test(test_first_call_kernel_flips_the_last_bit_of_the_first_fused_output_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
