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

struct suggestion {
    int distance, index;
};

static int compare_suggestions(const void *a, const void *b)
{
    const struct suggestion *x = a, *y = b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A name qualifies when it is a near miss or contains what was typed
 * ("bs1" finds every *_bs1); closest first, then in list order. */
int case_list_suggest(const struct case_list *list, const char *name, const char **out, int n)
{
    if (n <= 0 || list->count == 0)
        return 0;
    struct suggestion *found = malloc((size_t)list->count * sizeof *found);
    if (!found)
        return 0;
    int count = 0;
    for (int i = 0; i < list->count; i++) {
        int d = text_edit_distance(name, list->items[i].name);
        if (text_is_near_miss(name, d) || (*name && strstr(list->items[i].name, name)))
            found[count++] = (struct suggestion){d, i};
    }
    qsort(found, (size_t)count, sizeof *found, compare_suggestions);
    if (count > n)
        count = n;
    for (int i = 0; i < count; i++)
        out[i] = list->items[found[i].index].name;
    free(found);
    return count;
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
