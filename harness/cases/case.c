/* case: what callers ask of loaded cases and case lists: find a case by
 * name (or suggest near names), its labels, and the verdicts each impl is
 * expected to get. Loading is case_load.c; the keys are case_keys.c. */
#include "case.h"

#include "case_text.h"

#include <stdlib.h>
#include <string.h>

void case_list_free(struct case_list *list)
{
    free(list->items);
    memset(list, 0, sizeof *list);
}

const struct ckpt_case *case_list_find(const struct case_list *list, const char *name)
{
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, name) == 0)
            return &list->items[i];
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Queries                                                              */

static const char *case_name_at(const void *ctx, int i) { return ((const struct case_list *)ctx)->items[i].name; }

int case_list_suggest(const struct case_list *list, const char *name, const char **out, int n)
{
    return text_suggest(name, case_name_at, list, list->count, out, n);
}

struct label_set {
    const char **names;
    int count;
};

static const char *label_at(const void *ctx, int i) { return ((const struct label_set *)ctx)->names[i]; }

int case_list_suggest_label(const struct case_list *list, const char *label, const char **out, int n)
{
    struct label_set set = {malloc(((size_t)list->count * CASE_MAX_LABELS + 1) * sizeof *set.names), 0};
    if (!set.names)
        return 0;
    for (int i = 0; i < list->count; i++)
        for (int k = 0; k < list->items[i].n_labels; k++) {
            const char *name = list->items[i].labels[k];
            int seen = 0;
            for (int j = 0; j < set.count && !seen; j++)
                seen = strcmp(set.names[j], name) == 0;
            if (!seen)
                set.names[set.count++] = name;
        }
    int found = text_suggest(label, label_at, &set, set.count, out, n);
    free(set.names);
    return found;
}

/* The impls the harness ships as correct (is_reference in impls/registry.c,
 * which this torch-free module does not link; test_impls checks the two
 * agree); anything else is a planted bug (impls/faulty/) that is expected
 * to be caught. */
static int is_reference_impl(const char *impl)
{
    static const char *const references[] = {"none", "reentrant", "nonreentrant", "selective", NULL};
    return text_name_index(references, impl) >= 0;
}

unsigned case_expected_mask(const struct ckpt_case *c, const char *impl)
{
    for (int i = 0; i < c->n_expect; i++)
        if (strcmp(c->expect[i].impl, impl) == 0)
            return c->expect[i].verdict_mask;
    if (is_reference_impl(impl))
        return (1u << V_PASS) | (1u << V_NOISE);
    return (1u << V_FAIL) | (1u << V_MEMFAIL);
}

int case_has_label(const struct ckpt_case *c, const char *label)
{
    for (int i = 0; i < c->n_labels; i++)
        if (strcmp(c->labels[i], label) == 0)
            return 1;
    return 0;
}
