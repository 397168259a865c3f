/* test_case: the case-file loader (harness/cases/case.c). Each test writes a small
 * INI text to a temporary file, loads it, and checks one behaviour: the
 * defaults, each key, sweep expansion, each error class (status ST_INPUT and
 * the right line in a one-line message), duplicates, suggestions, expected
 * verdicts, and that the shipped cases/ directory loads. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case.h"
#include "dtype.h"
#include "error.h"

#ifndef CKPT_SOURCE_DIR
#define CKPT_SOURCE_DIR "."
#endif

/* ------------------------------------------------------------------ */
/* Helpers                                                              */

/* Writes `text` to a new temporary file; `path` receives its name. */
static void write_temp(const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/ckpt_case_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* Loads `text` as a case file into `list`; returns the status. */
static int load_text(struct case_list *list, const char *text)
{
    char path[64];
    write_temp(text, path, sizeof path);
    error_clear();
    int rc = case_list_load_file(list, path);
    unlink(path);
    return rc;
}

/* Loads text that must hold exactly one case and copies it out. */
static struct ckpt_case load_one(const char *text)
{
    struct case_list list = {0};
    int rc = load_text(&list, text);
    if (rc != ST_OK)
        fail_msg("unexpected error: %s", error_message());
    assert_int_equal(list.count, 1);
    struct ckpt_case c = list.items[0];
    case_list_free(&list);
    return c;
}

/* The load must fail with ST_INPUT, in one line that names the file and
 * `line` and contains `fragment`; the list must stay empty. */
static void expect_error(const char *text, int line, const char *fragment)
{
    char path[64];
    write_temp(text, path, sizeof path);
    struct case_list list = {0};
    error_clear();
    int rc = case_list_load_file(&list, path);
    unlink(path);
    const char *msg = error_message();
    char where[96];
    snprintf(where, sizeof where, "%s:%d: ", path, line);
    if (rc != ST_INPUT || strncmp(msg, where, strlen(where)) != 0 || !strstr(msg, fragment) ||
        strchr(msg, '\n'))
        fail_msg("status %d, message \"%s\"; wanted ST_INPUT, \"%s...%s...\"", rc, msg, where,
                 fragment);
    assert_int_equal(list.count, 0);
    case_list_free(&list);
}

/* ------------------------------------------------------------------ */
/* Defaults and keys                                                    */

static void test_defaults_are_the_documented_ones(void **state)
{
    (void)state;
    struct ckpt_case c;
    case_defaults(&c);
    assert_int_equal(c.model, MODEL_MLP);
    assert_int_equal(c.layers, 4);
    assert_int_equal(c.hidden, 64);
    assert_int_equal(c.seq, 8);
    assert_int_equal(c.batch, 4);
    assert_int_equal(c.heads, 4);
    assert_true(c.dropout == 0.1);
    assert_int_equal(c.dtype, DT_F32);
    assert_int_equal(c.autocast, AUTOCAST_OFF);
    assert_int_equal(c.fusion, FUSION_NONE);
    assert_string_equal(c.device, "cpu");
    assert_string_equal(c.draw_device, "");
    assert_int_equal(c.steps, 2);
    assert_true(c.seed == 1234);
    assert_int_equal(c.segments, 0);
    assert_true(c.lr == 0.01);
    assert_true(c.tolerance == 0.0);
    assert_true(c.min_memory_saving < 0);
    assert_int_equal(c.preserve_rng_state, 1);
    assert_int_equal(c.input_requires_grad, 1);
    assert_int_equal(c.rng_devices, RNG_ARGS_AND_CURRENT);
    assert_int_equal(c.noise_runs, 4);
    assert_int_equal(c.determinism_check, DETERMINISM_METADATA);
    assert_int_equal(c.early_stop, 1);
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.n_impls, 2);
    assert_string_equal(c.impls[0], "reentrant");
    assert_string_equal(c.impls[1], "nonreentrant");
    assert_int_equal(c.n_expect, 0);
    assert_int_equal(c.n_labels, 0);
}

static void test_empty_case_section_gets_defaults_and_its_place(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("; nothing but a name\n\n[case:plain]\n");
    struct ckpt_case d;
    case_defaults(&d);
    assert_string_equal(c.name, "plain");
    assert_int_equal(c.line, 3);
    assert_true(strncmp(c.file, "/tmp/ckpt_case_", 15) == 0);
    assert_int_equal(c.layers, d.layers);
    assert_int_equal(c.n_impls, 2);
}

static void test_every_key_is_parsed(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("[case:all]\n"
                                  "model = gpt_block\n"
                                  "layers = 6\n"
                                  "hidden = 48\n"
                                  "seq = 5\n"
                                  "batch = 3\n"
                                  "heads = 6\n"
                                  "dropout = 0.25\n"
                                  "dtype = bf16\n"
                                  "autocast = f16\n"
                                  "fusion = bias_gelu_atomic\n"
                                  "device = cuda:1\n"
                                  "steps = 3\n"
                                  "seed = 18446744073709551615\n"
                                  "segments = 3\n"
                                  "lr = 0.5\n"
                                  "tolerance = 2\n"
                                  "min_memory_saving = 0.3\n"
                                  "preserve_rng_state = no\n"
                                  "input_requires_grad = 0\n"
                                  "verify_values = yes\n"
                                  "rng_devices = args\n"
                                  "noise_runs = 0\n"
                                  "threads = 2\n"
                                  "impls = none, reentrant, no_rng_stash\n"
                                  "expect = no_rng_stash:FAIL, reentrant:PASS|NOISE\n"
                                  "labels = smoke, gpu\n");
    assert_int_equal(c.model, MODEL_GPT_BLOCK);
    assert_int_equal(c.layers, 6);
    assert_int_equal(c.hidden, 48);
    assert_int_equal(c.seq, 5);
    assert_int_equal(c.batch, 3);
    assert_int_equal(c.heads, 6);
    assert_true(c.dropout == 0.25);
    assert_int_equal(c.dtype, DT_BF16);
    assert_int_equal(c.autocast, AUTOCAST_F16);
    assert_int_equal(c.fusion, FUSION_BIAS_GELU_ATOMIC);
    assert_string_equal(c.device, "cuda:1");
    assert_int_equal(c.steps, 3);
    assert_true(c.seed == UINT64_MAX);
    assert_int_equal(c.segments, 3);
    assert_true(c.lr == 0.5);
    assert_true(c.tolerance == 2.0);
    assert_true(c.min_memory_saving == 0.3);
    assert_int_equal(c.preserve_rng_state, 0);
    assert_int_equal(c.input_requires_grad, 0);
    assert_int_equal(c.determinism_check, DETERMINISM_VALUES);
    assert_int_equal(c.rng_devices, RNG_ARGS_ONLY);
    assert_int_equal(c.noise_runs, 0);
    assert_int_equal(c.threads, 2);
    assert_int_equal(c.n_impls, 3);
    assert_string_equal(c.impls[2], "no_rng_stash");
    assert_int_equal(c.n_expect, 2);
    assert_string_equal(c.expect[0].impl, "no_rng_stash");
    assert_int_equal(c.expect[0].verdict_mask, 1u << V_FAIL);
    assert_string_equal(c.expect[1].impl, "reentrant");
    assert_int_equal(c.expect[1].verdict_mask, (1u << V_PASS) | (1u << V_NOISE));
    assert_int_equal(c.n_labels, 2);
    assert_string_equal(c.labels[0], "smoke");
    assert_string_equal(c.labels[1], "gpu");
}

static void test_bool_spellings(void **state)
{
    (void)state;
    const char *yes[] = {"true", "True", "yes", "1"};
    const char *no[] = {"false", "FALSE", "no", "0"};
    for (int i = 0; i < 4; i++) {
        char text[128];
        snprintf(text, sizeof text, "[case:b]\nverify_values = %s\npreserve_rng_state = %s\n",
                 yes[i], no[i]);
        struct ckpt_case c = load_one(text);
        assert_int_equal(c.determinism_check, DETERMINISM_VALUES);
        assert_int_equal(c.preserve_rng_state, 0);
    }
}

/* PyTorch's names; verify_values is the older spelling of `values`, and
 * both keys set the one field, so the later line decides. */
static void test_determinism_check_and_its_verify_values_spelling(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\ndeterminism_check = none\n").determinism_check, DETERMINISM_NONE);
    assert_int_equal(load_one("[case:a]\ndeterminism_check = values\n").determinism_check, DETERMINISM_VALUES);
    assert_int_equal(load_one("[case:a]\ndeterminism_check = values\nverify_values = false\n").determinism_check,
                     DETERMINISM_METADATA);
    assert_int_equal(load_one("[case:a]\nverify_values = true\ndeterminism_check = none\n").determinism_check,
                     DETERMINISM_NONE);
    assert_int_equal(load_one("[case:a]\nearly_stop = false\n").early_stop, 0);
    expect_error("[case:a]\ndeterminism_check = default\n", 2, "'default'");
    expect_error("[case:a]\nearly_stop = sometimes\n", 2, "'sometimes'");
}

static void test_dtype_aliases(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\ndtype = fp32\n").dtype, DT_F32);
    assert_int_equal(load_one("[case:a]\ndtype = bfloat16\n").dtype, DT_BF16);
    assert_int_equal(load_one("[case:a]\ndtype = half\n").dtype, DT_F16);
    assert_int_equal(load_one("[case:a]\nautocast = bfloat16\n").autocast, AUTOCAST_BF16);
}

struct attr_text {
    char ini[4096];
    int count;
};

/* Collects attributes as case-file lines, leaving out where it came from. */
static void collect_attr(void *ctx, const char *key, const char *value)
{
    struct attr_text *t = ctx;
    t->count++;
    if (strcmp(key, "name") == 0 || strcmp(key, "file") == 0 || strcmp(key, "line") == 0)
        return;
    size_t used = strlen(t->ini);
    snprintf(t->ini + used, sizeof t->ini - used, "%s = %s\n", key, value);
}

static void test_rng_devices_also_reads_its_former_name_and_spellings(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\nrng_devices = args\n").rng_devices, RNG_ARGS_ONLY);
    assert_int_equal(load_one("[case:a]\nrng_devices = args+current\n").rng_devices, RNG_ARGS_AND_CURRENT);
    assert_int_equal(load_one("[case:a]\nrng_policy = args_only\n").rng_devices, RNG_ARGS_ONLY);
    assert_int_equal(load_one("[case:a]\nrng_policy = args_and_current\n").rng_devices, RNG_ARGS_AND_CURRENT);
    expect_error("[case:a]\nrng_devices = current\n", 2, "'current' for 'rng_devices'");
}

static void test_draw_device_is_same_or_a_device_and_prints_back(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("[case:a]\ndraw_device = cuda:0\n");
    assert_string_equal(c.draw_device, "cuda:0");
    assert_string_equal(c.device, "cpu");
    assert_string_equal(load_one("[case:a]\ndraw_device = same\n").draw_device, "");
    struct attr_text attrs = {.ini = ""};
    case_foreach_attr(&c, collect_attr, &attrs);
    assert_non_null(strstr(attrs.ini, "draw_device = cuda:0\n"));
    expect_error("[case:a]\ndraw_device = gpu\n", 2, "'gpu' for 'draw_device'");
}

static void test_error_draw_device_only_for_mlp(void **state)
{
    (void)state;
    expect_error("[case:d]\ndraw_device = cuda:0\nmodel = gpt_block\n", 3,
                 "case 'd': draw_device is only supported for model mlp");
}

static void test_error_stateful_models_run_unfused_float32_without_autocast(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\nmodel = bn_mlp\n").model, MODEL_BN_MLP);
    assert_int_equal(load_one("[case:a]\nmodel = scaled_mlp\n").model, MODEL_SCALED_MLP);
    expect_error("[case:f]\nmodel = bn_mlp\nfusion = bias_gelu\n", 3, "case 'f': model bn_mlp runs unfused");
    expect_error("[case:a]\nmodel = scaled_mlp\nautocast = bf16\n", 3,
                 "case 'a': model scaled_mlp runs without autocast");
    expect_error("[case:d]\nmodel = scaled_mlp\ndtype = bf16\n", 3,
                 "case 'd': model scaled_mlp runs in float32");
}

static void test_error_bn_mlp_needs_more_than_one_value_per_channel(void **state)
{
    (void)state;
    expect_error("[case:b]\nmodel = bn_mlp\nbatch = 1\nseq = 1\n", 4,
                 "case 'b': model bn_mlp normalises over batch x seq = 1 value per channel");
}

static void test_segments_every_sqrt_and_number(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\nsegments = every\n").segments, 0);
    assert_int_equal(load_one("[case:a]\nsegments = 2\n").segments, 2);
    /* sqrt is taken of the final layers, even when layers comes later */
    assert_int_equal(load_one("[case:a]\nsegments = sqrt\nlayers = 9\n").segments, 3);
    assert_int_equal(load_one("[case:a]\nsegments = sqrt\nlayers = 1\n").segments, 1);
    assert_int_equal(load_one("[case:a]\nsegments = sqrt\nlayers = 6\n").segments, 2);
}

static void test_min_memory_saving_fraction_or_none(void **state)
{
    (void)state;
    assert_true(load_one("[case:a]\nmin_memory_saving = 0.2\n").min_memory_saving == 0.2);
    assert_true(load_one("[case:a]\nmin_memory_saving = 0\n").min_memory_saving == 0.0);
    assert_true(load_one("[case:a]\nmin_memory_saving = none\n").min_memory_saving < 0);
}

static void test_comments_indentation_and_empty_lists(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("# leading comment\n"
                                  "[defaults]   ; trailing comment\n"
                                  "labels = nightly\n"
                                  "[case:x]\n"
                                  "    batch = 7   ; indented, with a comment\n"
                                  "\tlabels =\n");
    assert_int_equal(c.batch, 7);
    assert_int_equal(c.n_labels, 0);
}

static void test_defaults_section_applies_to_later_sections_only(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, "[case:before]\n"
                                      "[defaults]\n"
                                      "batch = 16\n"
                                      "labels = nightly\n"
                                      "[case:after]\n"
                                      "[case:override]\n"
                                      "batch = 2\n"),
                     ST_OK);
    assert_int_equal(list.count, 3);
    assert_int_equal(case_list_find(&list, "before")->batch, 4);
    assert_int_equal(case_list_find(&list, "after")->batch, 16);
    assert_true(case_has_label(case_list_find(&list, "after"), "nightly"));
    assert_int_equal(case_list_find(&list, "override")->batch, 2);
    case_list_free(&list);
}

/* ------------------------------------------------------------------ */
/* Sweeps                                                               */

static const char *const fusion_sweep = "[sweep:mlp_batch_fusion]\n"
                                        "name = {fusion}_bs{batch}        ; pattern\n"
                                        "axis.batch = 1, 2, 4, 8, 32\n"
                                        "axis.fusion = none, bias_gelu, bias_gelu_atomic\n"
                                        "model = mlp\n"
                                        "dropout = 0.1\n"
                                        "labels = nightly\n";

static void test_sweep_expands_cartesian_product(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, fusion_sweep), ST_OK);
    assert_int_equal(list.count, 15);
    const struct ckpt_case *c = case_list_find(&list, "bias_gelu_bs1");
    assert_non_null(c);
    assert_int_equal(c->batch, 1);
    assert_int_equal(c->fusion, FUSION_BIAS_GELU);
    assert_int_equal(c->line, 1);
    assert_true(case_has_label(c, "nightly"));
    assert_non_null(case_list_find(&list, "bias_gelu_atomic_bs32"));
    case_list_free(&list);
}

static void test_sweep_first_axis_varies_slowest(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, fusion_sweep), ST_OK);
    assert_string_equal(list.items[0].name, "none_bs1");
    assert_string_equal(list.items[1].name, "bias_gelu_bs1");
    assert_string_equal(list.items[2].name, "bias_gelu_atomic_bs1");
    assert_string_equal(list.items[3].name, "none_bs2");
    assert_string_equal(list.items[14].name, "bias_gelu_atomic_bs32");
    case_list_free(&list);
}

static void test_sweep_name_uses_axis_text_as_written(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, "[sweep:seg]\nname = mlp_seg{segments}\nlayers = 4\n"
                                      "axis.segments = 1, 2, sqrt, every\n"),
                     ST_OK);
    assert_int_equal(list.count, 4);
    assert_int_equal(case_list_find(&list, "mlp_segsqrt")->segments, 2);
    assert_int_equal(case_list_find(&list, "mlp_segevery")->segments, 0);
    assert_int_equal(case_list_find(&list, "mlp_seg1")->segments, 1);
    case_list_free(&list);
}

static void test_sweep_label_key_labels_named_members(void **state)
{
    (void)state;
    struct case_list list = {0};
    char text[1024];
    snprintf(text, sizeof text, "%slabel.smoke = bias_gelu_bs1, none_bs4\n", fusion_sweep);
    assert_int_equal(load_text(&list, text), ST_OK);
    int smoke = 0;
    for (int i = 0; i < list.count; i++)
        smoke += case_has_label(&list.items[i], "smoke");
    assert_int_equal(smoke, 2);
    assert_true(case_has_label(case_list_find(&list, "none_bs4"), "smoke"));
    assert_true(case_has_label(case_list_find(&list, "none_bs4"), "nightly"));
    case_list_free(&list);
}

/* ------------------------------------------------------------------ */
/* Errors: ST_INPUT, one line, FILE:LINE                                */

static void test_error_syntax_line(void **state)
{
    (void)state;
    expect_error("[case:a]\nbatch = 2\nthis line has no equals sign\n", 3, "syntax error");
}

static void test_error_unclosed_section_header(void **state)
{
    (void)state;
    expect_error("[case:a]\nbatch = 2\n\n[case:b\n", 4, "no closing ']'");
}

static void test_error_unknown_section(void **state)
{
    (void)state;
    expect_error("[case:a]\n[cases:b]\nbatch = 1\n", 2, "unknown section '[cases:b]'");
}

static void test_error_bad_section_name(void **state)
{
    (void)state;
    expect_error("[case:]\n", 1, "bad name ''");
    expect_error("\n[case:a b]\n", 2, "bad name 'a b'");
}

static void test_error_key_before_any_section(void **state)
{
    (void)state;
    expect_error("; header\nbatch = 2\n[case:a]\n", 2, "before any section");
}

static void test_error_unknown_key_suggests(void **state)
{
    (void)state;
    expect_error("[case:x]\nlayers = 2\nbatchh = 4\n", 3,
                 "unknown key 'batchh' in [case:x] (did you mean 'batch'?)");
    expect_error("[case:x]\nfoo = 1\n", 2, "unknown key 'foo' in [case:x]");
}

static void test_error_repeated_key(void **state)
{
    (void)state;
    expect_error("[case:a]\nbatch = 2\nlayers = 3\nbatch = 4\n", 4,
                 "key 'batch' repeated in [case:a] (first set at line 2)");
}

static void test_error_bad_value_names_value_and_allowed(void **state)
{
    (void)state;
    expect_error("[case:a]\nmodel = transformer\n", 2,
                 "bad value 'transformer' for 'model' in [case:a]: expected one of mlp");
    expect_error("[case:a]\nfusion = gelu\n", 2, "'gelu'");
    expect_error("[case:a]\ndtype = int64\n", 2, "'int64' for 'dtype'");
    expect_error("[case:a]\ndevice = gpu0\n", 2, "'gpu0' for 'device'");
    expect_error("[case:a]\ndevice = cuda:x\n", 2, "'cuda:x'");
    expect_error("[case:a]\nverify_values = maybe\n", 2, "'maybe'");
    expect_error("[case:a]\nseed = -1\n", 2, "'-1' for 'seed'");
    expect_error("[case:a]\nbatch = 4x\n", 2, "'4x' for 'batch'");
    expect_error("[case:a]\nimpls =\n", 2, "for 'impls'");
    expect_error("[case:a]\nlabels = smoke, smoke\n", 2, "'smoke' is listed twice");
    expect_error("[case:a]\nexpect = reentrant:PAS\n", 2, "unknown verdict 'PAS'");
    expect_error("[case:a]\nexpect = reentrant\n", 2, "bad item 'reentrant' in 'expect'");
}

static void test_error_value_out_of_range(void **state)
{
    (void)state;
    expect_error("[case:a]\nlayers = 0\n", 2, "'0' for 'layers' in [case:a]: expected an integer 1..1024");
    expect_error("[case:a]\nhidden = 65537\n", 2, "'65537' for 'hidden'");
    expect_error("[case:a]\nbatch = 0\n", 2, "'0' for 'batch'");
    expect_error("[case:a]\ndropout = 1\n", 2, "'1' for 'dropout'");
    expect_error("[case:a]\ndropout = -0.1\n", 2, "'-0.1' for 'dropout'");
    expect_error("[case:a]\nsteps = 0\n", 2, "'0' for 'steps'");
    expect_error("[case:a]\ntolerance = -1\n", 2, "'-1' for 'tolerance'");
    expect_error("[case:a]\nmin_memory_saving = 1.5\n", 2, "'1.5' for 'min_memory_saving'");
    expect_error("[case:a]\nsegments = 0\n", 2, "'0' for 'segments'");
    expect_error("[case:a]\nlr = nan\n", 2, "'nan' for 'lr'");
}

static void test_error_gpt_hidden_not_multiple_of_heads(void **state)
{
    (void)state;
    expect_error("[case:g]\nmodel = gpt_block\nhidden = 30\nheads = 4\n", 4,
                 "case 'g': hidden (30) must be a multiple of heads (4)");
}

static void test_error_segments_exceed_layers(void **state)
{
    (void)state;
    expect_error("[case:s]\nsegments = 5\nlayers = 2\nbatch = 1\n", 3,
                 "case 's': segments (5) exceeds layers (2)");
}

static void test_error_expect_names_impl_not_run(void **state)
{
    (void)state;
    expect_error("[case:e]\nimpls = reentrant\nexpect = nonreentrant:FAIL\n", 3,
                 "expect names impl 'nonreentrant', which is not in impls (reentrant)");
}

static void test_error_sweep_only_key_in_case(void **state)
{
    (void)state;
    expect_error("[case:a]\nname = b\n", 2, "only allowed in [sweep:NAME]");
    expect_error("[defaults]\naxis.batch = 1, 2\n", 2, "only allowed in [sweep:NAME]");
}

static void test_error_sweep_without_name(void **state)
{
    (void)state;
    expect_error("[case:a]\n\n[sweep:s]\naxis.batch = 1, 2\n", 3, "has no 'name' pattern");
}

static void test_error_sweep_without_axes(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = x\nbatch = 2\n", 1, "has no axis.KEY lists");
}

static void test_error_sweep_placeholder_not_axis(void **state)
{
    (void)state;
    expect_error("[sweep:s]\naxis.batch = 1, 2\nname = {fusion}_bs{batch}\n", 3,
                 "placeholder '{fusion}' in name pattern '{fusion}_bs{batch}' is not an axis of "
                 "[sweep:s] (axes: batch)");
}

static void test_error_sweep_pattern_misses_axis(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = bs{batch}\naxis.batch = 1, 2\naxis.fusion = none, bias_gelu\n",
                 2, "does not use axis 'fusion'");
}

static void test_error_sweep_empty_axis(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = bs{batch}\naxis.batch =\n", 3,
                 "'axis.batch' in [sweep:s] is empty");
    expect_error("[sweep:s]\nname = bs{batch}\naxis.batch = 1, , 2\n", 3, "empty value");
}

static void test_error_sweep_bad_axis_value_points_at_axis(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = bs{batch}\nlayers = 2\naxis.batch = 1, 0\n", 4,
                 "bad value '0' for 'axis.batch' in [sweep:s]");
}

static void test_error_sweep_axis_over_list_key(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = x{labels}\naxis.labels = a, b\n", 3, "cannot be a sweep axis");
}

static void test_error_sweep_key_both_plain_and_axis(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = bs{batch}\nbatch = 2\naxis.batch = 1, 2\n", 4,
                 "'batch' is set both as a plain key (line 3)");
}

static void test_error_sweep_label_names_missing_member(void **state)
{
    (void)state;
    expect_error("[sweep:s]\nname = bs{batch}\naxis.batch = 1, 2\nlabel.smoke = bs3\n", 4,
                 "'label.smoke' names 'bs3', which [sweep:s] does not produce");
}

static void test_error_line_too_long(void **state)
{
    (void)state;
    char text[1200] = "[case:a]\n; ";
    memset(text + strlen(text), 'x', 1000);
    expect_error(text, 2, "line is too long");
}

static void test_error_missing_file(void **state)
{
    (void)state;
    struct case_list list = {0};
    int rc = case_list_load(&list, "/nonexistent/ckpt/cases.ini");
    assert_int_equal(rc, ST_INPUT);
    assert_non_null(strstr(error_message(), "/nonexistent/ckpt/cases.ini"));
}

/* ------------------------------------------------------------------ */
/* Duplicates and lists                                                 */

static void test_duplicate_name_in_file_names_both_lines(void **state)
{
    (void)state;
    expect_error("[case:bs1]\n[sweep:s]\nname = bs{batch}\naxis.batch = 1, 2\n", 2,
                 "duplicate case name 'bs1' (first defined at /tmp/ckpt_case_");
    expect_error("[case:a]\nbatch = 1\n[case:a]\n", 3, ":1)");
}

static void test_duplicate_name_across_files_names_both_files(void **state)
{
    (void)state;
    char first[64], second[64];
    write_temp("[case:shared]\n", first, sizeof first);
    write_temp("[case:other]\n\n[case:shared]\n", second, sizeof second);
    struct case_list list = {0};
    assert_int_equal(case_list_load_file(&list, first), ST_OK);
    assert_int_equal(case_list_load_file(&list, second), ST_INPUT);
    char wanted[256];
    snprintf(wanted, sizeof wanted,
             "%s:3: duplicate case name 'shared' (first defined at %s:1)", second, first);
    assert_string_equal(error_message(), wanted);
    /* a failed load adds nothing: 'other' is not there */
    assert_int_equal(list.count, 1);
    assert_null(case_list_find(&list, "other"));
    unlink(first);
    unlink(second);
    case_list_free(&list);
}

static void test_failed_load_leaves_list_unchanged(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, "[case:keep]\n"), ST_OK);
    assert_int_equal(load_text(&list, "[case:new1]\n[case:new2]\nbatch = -3\n"), ST_INPUT);
    assert_int_equal(list.count, 1);
    assert_string_equal(list.items[0].name, "keep");
    case_list_free(&list);
}

static void test_find(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, fusion_sweep), ST_OK);
    assert_string_equal(case_list_find(&list, "none_bs8")->name, "none_bs8");
    assert_null(case_list_find(&list, "none_bs3"));
    case_list_free(&list);
}

static void test_suggest_closest_first(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, fusion_sweep), ST_OK);
    const char *out[3];
    int n = case_list_suggest(&list, "bias_gelu_bs", out, 3);
    assert_true(n >= 2);
    assert_string_equal(out[0], "bias_gelu_bs1"); /* distance 1, first in list order */
    assert_string_equal(out[1], "bias_gelu_bs2");
    n = case_list_suggest(&list, "bais_gelu_bs1", out, 1);
    assert_int_equal(n, 1);
    assert_string_equal(out[0], "bias_gelu_bs1");
    assert_int_equal(case_list_suggest(&list, "completely_unrelated_words", out, 3), 0);
    case_list_free(&list);
}

static void test_suggest_finds_names_containing_the_text(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(load_text(&list, fusion_sweep), ST_OK);
    const char *out[5];
    int n = case_list_suggest(&list, "_bs32", out, 5);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++)
        assert_non_null(strstr(out[i], "_bs32"));
    case_list_free(&list);
}

static void test_load_dir_reads_ini_files_in_name_order(void **state)
{
    (void)state;
    char dir[] = "/tmp/ckpt_cases_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *names[] = {"b.ini", "a.ini", "notes.txt", ".hidden.ini"};
    const char *texts[] = {"[case:from_b]\n", "[case:from_a]\n", "not a case file\n",
                           "[case:hidden]\n"};
    char path[128];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(texts[i], f);
        fclose(f);
    }
    struct case_list list = {0};
    assert_int_equal(case_list_load(&list, dir), ST_OK);
    assert_int_equal(list.count, 2);
    assert_string_equal(list.items[0].name, "from_a");
    assert_string_equal(list.items[1].name, "from_b");
    case_list_free(&list);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------ */
/* Verdicts, labels, attributes                                         */

static void test_verdict_names_round_trip(void **state)
{
    (void)state;
    const char *names[V_COUNT] = {"PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR", "NOT_OBSERVABLE"};
    for (int v = 0; v < V_COUNT; v++) {
        assert_string_equal(verdict_name((enum verdict)v), names[v]);
        assert_int_equal(verdict_from_name(names[v]), v);
    }
    assert_int_equal(verdict_from_name("OK"), -1);
    assert_string_equal(verdict_name(V_COUNT), "?");
}

static void test_expected_mask_defaults(void **state)
{
    (void)state;
    struct ckpt_case c;
    case_defaults(&c);
    unsigned ok = (1u << V_PASS) | (1u << V_NOISE);
    unsigned caught = (1u << V_FAIL) | (1u << V_MEMFAIL);
    assert_int_equal(case_expected_mask(&c, "none"), ok);
    assert_int_equal(case_expected_mask(&c, "reentrant"), ok);
    assert_int_equal(case_expected_mask(&c, "nonreentrant"), ok);
    assert_int_equal(case_expected_mask(&c, "no_rng_stash"), caught);
    assert_int_equal(case_expected_mask(&c, "recompute_elided"), caught);
}

static void test_expected_mask_from_expect(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("[case:a]\nexpect = reentrant:FAIL, nonreentrant:NOT_OBSERVABLE\n");
    assert_int_equal(case_expected_mask(&c, "reentrant"), 1u << V_FAIL);
    assert_int_equal(case_expected_mask(&c, "nonreentrant"), 1u << V_NOT_OBSERVABLE);
}

static void test_has_label(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("[case:a]\nlabels = smoke, nightly\n");
    assert_true(case_has_label(&c, "smoke"));
    assert_true(case_has_label(&c, "nightly"));
    assert_false(case_has_label(&c, "gpu"));
}

static void test_backward_key_names_the_api_each_step_backward_uses(void **state)
{
    (void)state;
    assert_int_equal(load_one("[case:a]\n").backward, BACKWARD_LOSS);
    assert_int_equal(load_one("[case:a]\nbackward = grad\n").backward, BACKWARD_GRAD);
    assert_int_equal(load_one("[case:a]\nbackward = inputs\n").backward, BACKWARD_INPUTS);
    assert_int_equal(load_one("[case:a]\nbackward = twice\n").backward, BACKWARD_TWICE);
    assert_int_equal(backward_calls_per_step(BACKWARD_TWICE), 2);
    assert_int_equal(backward_calls_per_step(BACKWARD_INPUTS), 1);
    expect_error("[case:a]\nbackward = retain\n", 2, "'retain'");
}

static void test_attrs_cover_every_key_and_load_back(void **state)
{
    (void)state;
    struct ckpt_case c = load_one("[case:a]\nmodel = gpt_block\nhidden = 48\nheads = 6\n"
                                  "segments = 2\nlr = 0.003\nmin_memory_saving = 0.25\nmin_held_cut = 0.5\n"
                                  "impls = reentrant, no_rng_stash\n"
                                  "expect = no_rng_stash:FAIL|MEMFAIL\nlabels = smoke\n");
    struct attr_text first = {.ini = "[case:a]\n"};
    case_foreach_attr(&c, collect_attr, &first);
    assert_int_equal(first.count, 3 + 33); /* name, file, line + every key */
    assert_non_null(strstr(first.ini, "lr = 0.003\n"));
    assert_non_null(strstr(first.ini, "min_held_cut = 0.5\n"));
    assert_non_null(strstr(first.ini, "expect = no_rng_stash:FAIL|MEMFAIL\n"));
    assert_non_null(strstr(first.ini, "impls = reentrant,no_rng_stash\n"));

    struct ckpt_case again = load_one(first.ini);
    struct attr_text second = {.ini = "[case:a]\n"};
    case_foreach_attr(&again, collect_attr, &second);
    assert_string_equal(first.ini, second.ini);
}

/* ------------------------------------------------------------------ */
/* The shipped cases                                                    */

static void test_shipped_cases_load(void **state)
{
    (void)state;
    struct case_list list = {0};
    int rc = case_list_load(&list, CKPT_SOURCE_DIR "/cases");
    if (rc != ST_OK)
        fail_msg("%s", error_message());
    const struct ckpt_case *c = case_list_find(&list, "bias_gelu_bs1");
    assert_non_null(c);
    assert_int_equal(c->batch, 1);
    assert_int_equal(c->fusion, FUSION_BIAS_GELU);
    /* label.smoke puts one member of a sweep in the smoke suite */
    assert_true(case_has_label(case_list_find(&list, "state_bn_mlp_segevery"), "smoke"));
    assert_false(case_has_label(case_list_find(&list, "state_bn_mlp_seg2"), "smoke"));
    assert_non_null(case_list_find(&list, "mlp_no_input_grad"));
    assert_non_null(case_list_find(&list, "gpt_verify_values"));
    case_list_free(&list);
}

/* Every shipped case is nightly and small enough for 2 CPU cores, except
 * the benchmark's (cases/bench/, labels bench*: run by `ckpt-verify bench`,
 * sized to be compute-bound). */
static void test_shipped_cases_are_nightly_or_gpu_and_small(void **state)
{
    (void)state;
    struct case_list list = {0};
    assert_int_equal(case_list_load(&list, CKPT_SOURCE_DIR "/cases"), ST_OK);
    assert_true(list.count > 20);
    int smoke = 0;
    for (int i = 0; i < list.count; i++) {
        const struct ckpt_case *c = &list.items[i];
        if (case_has_label(c, "bench") || case_has_label(c, "bench_quick") || case_has_label(c, "bench_gpu") ||
            case_has_label(c, "bench_gpu_quick")) {
            if (case_has_label(c, "nightly") || case_has_label(c, "smoke"))
                fail_msg("%s is a benchmark case: keep it out of nightly and smoke", c->name);
            continue;
        }
        if (strcmp(c->device, "cpu") != 0 || c->draw_device[0]) {
            /* GPU cases (cases/gpu.ini) must stay out of the CPU suites. */
            if (!case_has_label(c, "gpu") || case_has_label(c, "nightly") || case_has_label(c, "smoke"))
                fail_msg("%s runs on %s: label it gpu, not nightly or smoke", c->name, c->device);
        } else if (!case_has_label(c, "nightly")) {
            fail_msg("%s is not labelled nightly", c->name);
        }
        assert_true(c->hidden <= 64 && c->seq <= 8 && c->layers <= 4 && c->batch <= 32);
        smoke += case_has_label(c, "smoke");
    }
    assert_true(smoke > 0 && smoke < list.count / 2);
    case_list_free(&list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_the_documented_ones),
        cmocka_unit_test(test_empty_case_section_gets_defaults_and_its_place),
        cmocka_unit_test(test_every_key_is_parsed),
        cmocka_unit_test(test_bool_spellings),
        cmocka_unit_test(test_determinism_check_and_its_verify_values_spelling),
        cmocka_unit_test(test_backward_key_names_the_api_each_step_backward_uses),
        cmocka_unit_test(test_dtype_aliases),
        cmocka_unit_test(test_rng_devices_also_reads_its_former_name_and_spellings),
        cmocka_unit_test(test_draw_device_is_same_or_a_device_and_prints_back),
        cmocka_unit_test(test_error_draw_device_only_for_mlp),
        cmocka_unit_test(test_error_stateful_models_run_unfused_float32_without_autocast),
        cmocka_unit_test(test_error_bn_mlp_needs_more_than_one_value_per_channel),
        cmocka_unit_test(test_segments_every_sqrt_and_number),
        cmocka_unit_test(test_min_memory_saving_fraction_or_none),
        cmocka_unit_test(test_comments_indentation_and_empty_lists),
        cmocka_unit_test(test_defaults_section_applies_to_later_sections_only),
        cmocka_unit_test(test_sweep_expands_cartesian_product),
        cmocka_unit_test(test_sweep_first_axis_varies_slowest),
        cmocka_unit_test(test_sweep_name_uses_axis_text_as_written),
        cmocka_unit_test(test_sweep_label_key_labels_named_members),
        cmocka_unit_test(test_error_syntax_line),
        cmocka_unit_test(test_error_unclosed_section_header),
        cmocka_unit_test(test_error_unknown_section),
        cmocka_unit_test(test_error_bad_section_name),
        cmocka_unit_test(test_error_key_before_any_section),
        cmocka_unit_test(test_error_unknown_key_suggests),
        cmocka_unit_test(test_error_repeated_key),
        cmocka_unit_test(test_error_bad_value_names_value_and_allowed),
        cmocka_unit_test(test_error_value_out_of_range),
        cmocka_unit_test(test_error_gpt_hidden_not_multiple_of_heads),
        cmocka_unit_test(test_error_segments_exceed_layers),
        cmocka_unit_test(test_error_expect_names_impl_not_run),
        cmocka_unit_test(test_error_sweep_only_key_in_case),
        cmocka_unit_test(test_error_sweep_without_name),
        cmocka_unit_test(test_error_sweep_without_axes),
        cmocka_unit_test(test_error_sweep_placeholder_not_axis),
        cmocka_unit_test(test_error_sweep_pattern_misses_axis),
        cmocka_unit_test(test_error_sweep_empty_axis),
        cmocka_unit_test(test_error_sweep_bad_axis_value_points_at_axis),
        cmocka_unit_test(test_error_sweep_axis_over_list_key),
        cmocka_unit_test(test_error_sweep_key_both_plain_and_axis),
        cmocka_unit_test(test_error_sweep_label_names_missing_member),
        cmocka_unit_test(test_error_line_too_long),
        cmocka_unit_test(test_error_missing_file),
        cmocka_unit_test(test_duplicate_name_in_file_names_both_lines),
        cmocka_unit_test(test_duplicate_name_across_files_names_both_files),
        cmocka_unit_test(test_failed_load_leaves_list_unchanged),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_suggest_closest_first),
        cmocka_unit_test(test_suggest_finds_names_containing_the_text),
        cmocka_unit_test(test_load_dir_reads_ini_files_in_name_order),
        cmocka_unit_test(test_verdict_names_round_trip),
        cmocka_unit_test(test_expected_mask_defaults),
        cmocka_unit_test(test_expected_mask_from_expect),
        cmocka_unit_test(test_has_label),
        cmocka_unit_test(test_attrs_cover_every_key_and_load_back),
        cmocka_unit_test(test_shipped_cases_load),
        cmocka_unit_test(test_shipped_cases_are_nightly_or_gpu_and_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
