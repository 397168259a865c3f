/* case_attrs: a case rebuilt from its recorded attributes (a report's
 * /case group), through the same key table that read the case file. */
#include "case_check.h"
#include "case_text.h"
#include "error.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct case_from_attrs {
    struct case_builder b;
    const char *source;
    int has_impls;
};

int case_attrs_begin(struct case_from_attrs **out, const char *source)
{
    struct case_from_attrs *a = calloc(1, sizeof *a);
    if (!a)
        return error_set(ST_INTERNAL, "out of memory reading the case of %s", source);
    case_builder_defaults(&a->b);
    a->source = source;
    *out = a;
    return ST_OK;
}

int case_attrs_apply(void *ctx, const char *key, const char *value)
{
    struct case_from_attrs *a = ctx;
    struct ckpt_case *c = &a->b.c;
    if (strcmp(key, "name") == 0) {
        snprintf(c->name, sizeof c->name, "%s", value);
        return ST_OK;
    }
    if (strcmp(key, "file") == 0) {
        snprintf(c->file, sizeof c->file, "%s", value);
        return ST_OK;
    }
    if (strcmp(key, "line") == 0) {
        long line;
        c->line = text_parse_long(value, 0, INT_MAX, &line) == ST_OK ? (int)line : 0;
        return ST_OK;
    }
    const struct key_spec *spec = case_key_find(key);
    if (!spec)
        return ST_OK; /* another producer's own attribute */
    struct where at = {a->source, 0, "/case", key, spec};
    a->has_impls |= case_key_id(spec) == K_IMPLS;
    if (case_key_apply(&a->b, &at, value) != ST_OK)
        return error_set(ST_INPUT, "%s: /case: attribute %s: bad value '%s': expected %s", a->source, key, value,
                         spec->allowed);
    return ST_OK;
}

int case_attrs_finish(struct case_from_attrs *a, struct ckpt_case *out)
{
    /* Another producer's file names its runs only in expect (if at all):
     * those are the case's impls, not the harness's default pair. */
    if (!a->has_impls) {
        struct ckpt_case *c = &a->b.c;
        c->n_impls = c->n_expect;
        for (int i = 0; i < c->n_expect; i++)
            snprintf(c->impls[i], sizeof c->impls[i], "%s", c->expect[i].impl);
    }
    int rc = case_check_keys(&a->b, a->source, 0);
    if (rc == ST_OK)
        *out = a->b.c;
    free(a);
    return rc;
}
