#include "case_check.h"

#include "case_policy.h"
#include "dtype.h"
#include "error.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The line to blame for a conflict between keys: the last of them set, or
 * the section when all come from the built-in defaults. */
static int latest_line(const struct case_builder *b, int section_line, const enum key_id *keys,
                       int n)
{
    int line = 0;
    for (int i = 0; i < n; i++)
        if (b->set_at[keys[i]] > line)
            line = b->set_at[keys[i]];
    return line ? line : section_line;
}

static int has_impl(const struct ckpt_case *c, const char *impl)
{
    for (int i = 0; i < c->n_impls; i++)
        if (strcmp(c->impls[i], impl) == 0)
            return 1;
    return 0;
}

/* The models with buffers run unfused, without autocast, in float32
 * (bn_mlp with more than one value per channel, as batch norm in training
 * demands). */
static int check_stateful_model(const struct case_builder *b, const char *path, int section_line)
{
    const struct ckpt_case *c = &b->c;
    const char *model = case_model_name(c->model);
    if (c->fusion != FUSION_NONE) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_FUSION}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs unfused (fusion = none)", path, line, c->name,
                         model);
    }
    if (c->autocast != AUTOCAST_OFF) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_AUTOCAST}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs without autocast", path, line, c->name, model);
    }
    if (c->dtype != DT_F32) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_DTYPE}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs in float32 (scaled_mlp rounds to bfloat16 "
                         "inside its quantiser), not %s", path, line, c->name, model, dtype_name((enum dtype)c->dtype));
    }
    if (c->model == MODEL_BN_MLP && (int64_t)c->batch * c->seq < 2) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_BATCH, K_SEQ}, 3);
        return error_set(ST_INPUT, "%s:%d: case '%s': model bn_mlp normalises over batch x seq = 1 value per "
                         "channel; batch norm in training needs more than one", path, line, c->name);
    }
    return ST_OK;
}

/* Checks that span keys (a single key's range is checked when it is set). */
int case_check_keys(const struct case_builder *b, const char *path, int section_line)
{
    const struct ckpt_case *c = &b->c;
    if (c->model == MODEL_GPT_BLOCK && c->hidden % c->heads != 0) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_HIDDEN, K_HEADS}, 3);
        return error_set(ST_INPUT, "%s:%d: case '%s': hidden (%d) must be a multiple of heads "
                         "(%d) for model gpt_block", path, line, c->name, c->hidden, c->heads);
    }
    if (c->draw_device[0] && c->model != MODEL_MLP) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_DRAW_DEVICE}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': draw_device is only supported for model mlp", path,
                         line, c->name);
    }
    if ((c->model == MODEL_BN_MLP || c->model == MODEL_SCALED_MLP) && check_stateful_model(b, path, section_line))
        return ST_INPUT;
    if (c->segments > c->layers) {
        int line = latest_line(b, section_line, (enum key_id[]){K_SEGMENTS, K_LAYERS}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': segments (%d) exceeds layers (%d)", path,
                         line, c->name, c->segments, c->layers);
    }
    int policy_line = latest_line(b, section_line, (enum key_id[]){K_POLICY, K_IMPLS, K_MODEL, K_FUSION}, 4);
    if (policy_check_case(c, path, policy_line))
        return ST_INPUT;
    for (int i = 0; i < c->n_expect; i++) {
        if (!has_impl(c, c->expect[i].impl)) {
            int line = latest_line(b, section_line, (enum key_id[]){K_EXPECT, K_IMPLS}, 2);
            char impls[CASE_MAX_IMPLS * CASE_WORD_MAX];
            case_format_words(c->impls, c->n_impls, impls, sizeof impls);
            return error_set(ST_INPUT, "%s:%d: case '%s': expect names impl '%s', which is not in "
                             "impls (%s)", path, line, c->name, c->expect[i].impl, impls);
        }
    }
    return ST_OK;
}

