/* judge_file: a report judged from its file: the runs its /case names, the
 * ones it lacks or holds incomplete, against their baseline or against the
 * steps /case promises (each an ERROR in its place), then
 * judge_listed over what it holds (judge.h, judge_file / judge_report). */
#include "judge.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "error.h"
#include "h5store.h"
#include "judge_internal.h"
#include "run_tensors.h"

/* The runs a file's /case names, which a complete report holds: its impls
 * (without impls, the runs its expect names), every run its expect names,
 * and the producer's own list, the attribute `runs` (python/ckpt_verify
 * writes it: its runs have no impls key). */
#define JUDGE_NAMED_MAX 64
struct named_runs {
    int n;
    char names[JUDGE_NAMED_MAX][64];
};

static int name_run(struct named_runs *l, const char *path, const char *name, size_t len)
{
    if (len == 0)
        return ST_OK;
    if (len >= sizeof l->names[0] || memchr(name, '/', len))
        return error_set(ST_INPUT, "%s: /case: attribute runs: '%.*s' is not a run name", path, (int)len, name);
    for (int i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == len && strncmp(l->names[i], name, len) == 0)
            return ST_OK;
    if (l->n == JUDGE_NAMED_MAX)
        return error_set(ST_INPUT, "%s: /case names more than %d runs", path, JUDGE_NAMED_MAX);
    snprintf(l->names[l->n++], sizeof l->names[0], "%.*s", (int)len, name);
    return ST_OK;
}

/* /case's attributes: `runs` is kept here, the others go to the case. */
struct case_walk {
    struct case_from_attrs *builder;
    const char *path;
    char runs[4096];
    int has_steps; /* /case says how many steps every run holds */
};

static int case_walk_attr(void *ctx, const char *key, const char *value)
{
    struct case_walk *w = ctx;
    w->has_steps |= strcmp(key, "steps") == 0;
    if (strcmp(key, "runs") != 0)
        return case_attrs_apply(w->builder, key, value);
    if (strlen(value) >= sizeof w->runs)
        return error_set(ST_INPUT, "%s: /case: attribute runs longer than %zu bytes", w->path, sizeof w->runs - 1);
    snprintf(w->runs, sizeof w->runs, "%s", value);
    return ST_OK;
}

static int named_runs_of(const char *path, const struct ckpt_case *c, const char *runs_attr, struct named_runs *l)
{
    int st = ST_OK;
    l->n = 0;
    /* /case runs first: the order the producer was given them. The impls
     * of a file without one are its expect's names (case_attrs_finish),
     * which would list the runs expected to fail first. */
    for (const char *p = runs_attr; *p && !st;) {
        size_t len = strcspn(p, ",");
        const char *end = p + len;
        while (p < end && isspace((unsigned char)*p))
            p++;
        size_t trimmed = (size_t)(end - p);
        while (trimmed > 0 && isspace((unsigned char)p[trimmed - 1]))
            trimmed--;
        st = name_run(l, path, p, trimmed);
        p = *end ? end + 1 : end;
    }
    for (int i = 0; i < c->n_impls && !st; i++)
        st = name_run(l, path, c->impls[i], strlen(c->impls[i]));
    for (int i = 0; i < c->n_expect && !st; i++)
        st = name_run(l, path, c->expect[i].impl, strlen(c->expect[i].impl));
    return st;
}

#define JUDGE_GONE_MAX (JUDGE_NAMED_MAX + CASE_MAX_IMPLS * 2)

/* What of ref's tensors (steps/, final_params/) r lacks: how many, the
 * first in recorded order, and whether r stopped short: it lacks a step
 * ref recorded, or a tensor recorded after the steps (final_params/). A
 * run that holds every step and every final parameter but not some
 * gradient did not produce it (a checkpoint that drops a layer's
 * gradients): that is the verdict's to judge (FAIL), not a cut report. */
static void missing_from(const struct run_record *ref, const struct run_record *r, int *missing, int *stopped,
                         int *of, char *first, size_t len)
{
    *missing = *stopped = *of = 0;
    first[0] = '\0';
    for (int i = 0; i < ref->n; i++) {
        const char *p = ref->items[i].path;
        if (!envelope_in_scope(p))
            continue;
        (*of)++;
        if (run_record_find(r, p))
            continue;
        if (!(*missing)++)
            snprintf(first, len, "%s", p);
        if (strncmp(p, "steps/", 6) != 0) {
            *stopped = 1;
            continue;
        }
        char loss[RUN_PATH_MAX];
        snprintf(loss, sizeof loss, "steps/%.*s/loss", (int)strcspn(p + 6, "/"), p + 6);
        if (!run_record_find(r, loss))
            *stopped = 1;
    }
}

/* What a report promises every run holds: each of /case's `steps`
 * (steps/<k>/loss, k = 1..steps; 0: /case says none) and the final value
 * of each parameter /params_init names (final_params/<name>). */
struct promise {
    int steps;
    const char *params; /* NUL-separated names (h5report_list_names), or NULL */
    int n_params;
};

/* 1 when r lacks some of what p promises, the first thing it lacks said
 * in what ("holds 1 of the 2 steps /case promises (its steps): steps/2/loss
 * missing"), the path in first. */
static int lacks_promise(const struct run_record *r, const struct promise *p, char *what, size_t what_len,
                         char *first, size_t first_len)
{
    int held = 0;
    first[0] = '\0';
    for (int k = 1; k <= p->steps; k++) {
        char loss[RUN_PATH_MAX];
        snprintf(loss, sizeof loss, "steps/%d/loss", k);
        if (run_record_find(r, loss))
            held++;
        else if (!first[0])
            snprintf(first, first_len, "%s", loss);
    }
    if (held < p->steps) {
        snprintf(what, what_len, "holds %d of the %d steps /case promises (its steps)", held, p->steps);
        return 1;
    }
    const char *name = p->params;
    for (int i = 0; i < p->n_params; i++, name += strlen(name) + 1) {
        char path[RUN_PATH_MAX];
        snprintf(path, sizeof path, "final_params/%s", name);
        if (!run_record_find(r, path)) {
            snprintf(first, first_len, "%s", path);
            snprintf(what, what_len, "lacks the final value of a parameter /params_init names (%d of them)",
                     p->n_params);
            return 1;
        }
    }
    return 0;
}

/* A new ERROR in gone for run `name`, or NULL when it already is one
 * (for what it lacks first). */
static struct gone_run *add_gone(struct gone_run *gone, int *n_gone, const char *name)
{
    for (int i = 0; i < *n_gone; i++)
        if (strcmp(gone[i].name, name) == 0)
            return NULL;
    struct gone_run *g = &gone[(*n_gone)++];
    snprintf(g->name, sizeof g->name, "%s", name);
    return g;
}

/* The first baseline of the family run r is judged against ("<family>_k")
 * that lacks some of what p promises, or NULL (what and first as
 * lacks_promise says them). */
static const struct run_record *short_baseline(const struct run_record *runs, int n, const struct run_record *r,
                                               const struct promise *p, char *what, size_t what_len, char *first,
                                               size_t first_len)
{
    char ref_name[80];
    run_record_reference(r, ref_name, sizeof ref_name);
    size_t fam = strlen(ref_name) > 2 ? strlen(ref_name) - 2 : 0; /* without "_0" */
    for (int b = 0; b < n; b++) {
        const struct run_record *base = &runs[b];
        if (!base->outcome[0] && judge_baseline_family_len(base->name) == fam &&
            strncmp(base->name, ref_name, fam) == 0 && lacks_promise(base, p, what, what_len, first, first_len))
            return base;
    }
    return NULL;
}

/* Completeness against what the report promises (struct promise): every
 * run, baselines included, holds it. A run that does not is an ERROR
 * naming what it lacks; so is every run judged against a baseline that
 * does not (its reference and its envelope would be another training than
 * the report claims). */
static int short_of_promise(const char *path, const struct run_record *runs, int n, const struct promise *p,
                            struct gone_run *gone, int *n_gone)
{
    char what[160], first[RUN_PATH_MAX];
    for (int i = 0; i < n; i++) {
        const struct run_record *r = &runs[i], *base;
        if (r->outcome[0] || judge_is_rerun(r->name) || judge_baseline_family_len(r->name))
            continue;
        if (*n_gone == JUDGE_GONE_MAX)
            return error_set(ST_INPUT, "%s: more than %d runs to judge", path, CASE_MAX_IMPLS * 2);
        struct gone_run *g;
        if (lacks_promise(r, p, what, sizeof what, first, sizeof first)) {
            if ((g = add_gone(gone, n_gone, r->name))) {
                snprintf(g->reason, sizeof g->reason, "run %s %s in %s: %s missing", r->name, what, path, first);
                snprintf(g->first_missing, sizeof g->first_missing, "%s missing", first);
            }
        } else if ((base = short_baseline(runs, n, r, p, what, sizeof what, first, sizeof first)) &&
                   (g = add_gone(gone, n_gone, r->name))) {
            snprintf(g->reason, sizeof g->reason, "run %s is judged against %s, which %s in %s: %s missing",
                     r->name, base->name, what, path, first);
            snprintf(g->first_missing, sizeof g->first_missing, "%s: %s missing", base->name, first);
        }
    }
    return ST_OK;
}

/* The runs judge_file cannot judge: named by /case and absent, or
 * stopped short of their reference (any run but baselines and re-runs). A
 * baseline that stopped short is bad input: the envelope needs whole
 * baselines. */
static int find_gone_runs(const char *path, const struct run_record *runs, int n, const struct named_runs *named,
                          struct gone_run *gone, int *n_gone)
{
    *n_gone = 0;
    for (int i = 0; i < named->n; i++) {
        const char *name = named->names[i];
        if (judge_is_baseline(name) || judge_is_rerun(name) || judge_find_run(runs, n, name))
            continue;
        struct gone_run *g = &gone[(*n_gone)++];
        snprintf(g->name, sizeof g->name, "%s", name);
        snprintf(g->reason, sizeof g->reason, "run %s is named by /case but absent from %s", name, path);
        snprintf(g->first_missing, sizeof g->first_missing, "/runs/%s missing", name);
    }
    for (int i = 0; i < n; i++) {
        const struct run_record *r = &runs[i];
        char ref_name[80], first[RUN_PATH_MAX];
        run_record_reference(r, ref_name, sizeof ref_name);
        size_t family = judge_baseline_family_len(r->name);
        if (family)
            snprintf(ref_name, sizeof ref_name, "%.*s_0", (int)family, r->name);
        const struct run_record *ref = judge_find_run(runs, n, ref_name);
        if (r->outcome[0] || judge_is_rerun(r->name) || !ref || ref == r || ref->outcome[0])
            continue;
        int missing, stopped, of;
        missing_from(ref, r, &missing, &stopped, &of, first, sizeof first);
        if (family && missing)
            return error_set(ST_INPUT, "%s: /runs/%s: incomplete: %s is missing (%d of %s's %d tensors), so it is "
                                       "not the same training as %s",
                             path, r->name, first, missing, ref_name, of, ref_name);
        if (family || !stopped)
            continue;
        int is_named = 0;
        for (int k = 0; k < named->n && !is_named; k++)
            is_named = strcmp(named->names[k], r->name) == 0;
        if (*n_gone == JUDGE_GONE_MAX)
            return error_set(ST_INPUT, "%s: more than %d runs to judge", path, CASE_MAX_IMPLS * 2);
        struct gone_run *g = &gone[(*n_gone)++];
        snprintf(g->name, sizeof g->name, "%s", r->name);
        snprintf(g->reason, sizeof g->reason, "run %s is %sincomplete in %s: missing %s (%d of %s's %d tensors are "
                 "missing)",
                 r->name, is_named ? "named by /case but " : "", path, first, missing, ref_name, of);
        snprintf(g->first_missing, sizeof g->first_missing, "%s missing", first);
    }
    return ST_OK;
}

int judge_file(const char *path, uint64_t *budget, struct case_result *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->h5_path, sizeof out->h5_path, "%s", path);
    struct h5report *rep;
    int st = h5report_open(&rep, path);
    if (st == ST_OK)
        st = judge_report(rep, budget, out);
    h5report_close(rep);
    return st;
}

int judge_report(struct h5report *rep, uint64_t *budget, struct case_result *out)
{
    uint64_t default_budget = H5STORE_READ_LIMIT;
    if (!budget)
        budget = &default_budget;
    const char *path = h5report_path(rep);
    memset(out, 0, sizeof *out);
    snprintf(out->h5_path, sizeof out->h5_path, "%s", path);
    int st = ST_OK;
    char name[CASE_NAME_MAX] = "";
    if (h5report_read_attr_str(rep, "/", "case", name, sizeof name)) {
        const char *slash = strrchr(path, '/');
        snprintf(name, sizeof name, "%s", slash ? slash + 1 : path);
        error_clear();
    }
    struct case_walk walk = {NULL, path, "", 0};
    if ((st = case_attrs_begin(&walk.builder, path)))
        return st;
    if (h5report_has_group(rep, "/case") && (st = h5report_foreach_attr(rep, "/case", case_walk_attr, &walk))) {
        struct ckpt_case ignored;
        case_attrs_finish(walk.builder, &ignored);
        return st;
    }
    if ((st = case_attrs_finish(walk.builder, &out->definition)))
        return st;
    snprintf(out->definition.name, sizeof out->definition.name, "%s", name);
    snprintf(out->name, sizeof out->name, "%s", name);
    char producer[256];
    out->definition_from_producer = h5report_read_attr_str(rep, "/", "producer", producer, sizeof producer) == ST_OK;
    error_clear();
    struct named_runs *named = calloc(1, sizeof *named);
    struct gone_run *gone = calloc(JUDGE_GONE_MAX, sizeof *gone);
    if (!named || !gone) {
        free(named);
        free(gone);
        return error_set(ST_INTERNAL, "out of memory reading %s", path);
    }
    if ((st = named_runs_of(path, &out->definition, walk.runs, named))) {
        free(named);
        free(gone);
        return st;
    }

    char (*names)[64] = NULL;
    int count = 0;
    if ((st = h5report_list_runs(rep, &names, &count))) {
        free(named);
        free(gone);
        return st;
    }
    struct run_record *runs = calloc((size_t)count + 1, sizeof *runs);
    struct checked_objects checked = {0};
    int loaded = 0;
    if (!runs)
        st = error_set(ST_INTERNAL, "out of memory reading %s", path);
    for (int i = 0; i < count && !st; i++) {
        /* Runs are read as stored tensors, loaded one at a time while they
         * are compared: at most JUDGE_TENSORS_HELD at once, so the budget
         * bounds each tensor, not the report. */
        if ((st = h5report_read_run_stored(rep, names[i], &runs[i])))
            break;
        runs[i].tensor_limit = *budget / JUDGE_TENSORS_HELD;
        runs[i].checked = &checked;
        loaded++;
        /* A run that did not complete may hold no step at all. */
        if (!runs[i].outcome[0])
            st = h5store_check_run(path, &runs[i]);
    }
    int n_gone = 0;
    if (!st)
        st = find_gone_runs(path, runs, loaded, named, gone, &n_gone);
    struct promise promised = {walk.has_steps ? out->definition.steps : 0, NULL, 0};
    char *params = NULL;
    if (!st && !(st = h5report_list_names(rep, "/params_init", &params, &promised.n_params))) {
        promised.params = params;
        st = short_of_promise(path, runs, loaded, &promised, gone, &n_gone);
    }
    free(params);
    if (!st) {
        const char *order[JUDGE_NAMED_MAX];
        for (int i = 0; i < named->n; i++)
            order[i] = named->names[i];
        st = judge_listed(&out->definition, runs, loaded, order, named->n, gone, n_gone, out);
        if (st == ST_INPUT && strncmp(error_message(), "/runs/", 6) == 0)
            error_wrap(st, "%s", path);
    }
    /* Every stored object is read at least once: judging skips the tensors
     * two runs share through one hard link, and a corrupt one must not be
     * equal to itself everywhere unseen. */
    if (!st)
        st = run_tensors_verify_unread(runs, loaded);
    if (!st && out->n_results == 0)
        snprintf(out->error, sizeof out->error, "no run to judge: %s holds only baselines and its /case names no "
                 "other run", path);
    for (int i = 0; i < loaded; i++) {
        h5store_let_go_source(&runs[i]);
        run_record_free(&runs[i]);
    }
    checked_objects_free(&checked);
    free(runs);
    free(names);
    free(named);
    free(gone);
    return st;
}
