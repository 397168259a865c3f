#include "step_backward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static void count_fire(void *ctx, struct var *leaf, const tensor *grad)
{
    (void)grad;
    struct hook_counts *h = ctx;
    if (h->current < 0)
        return;
    for (int i = 0; i < h->n_params; i++)
        if (h->params[i] == leaf)
            h->fires[(size_t)h->current * (size_t)h->n_params + (size_t)i]++;
}

int hook_counts_init(struct hook_counts *h, struct var **params, int n_params, int steps, enum backward_api api)
{
    memset(h, 0, sizeof *h);
    h->n_params = n_params;
    h->steps = steps;
    h->calls = backward_calls_per_step(api);
    h->params = params;
    h->current = -1;
    h->fires = calloc((size_t)steps * (size_t)h->calls * (size_t)n_params + 1, sizeof *h->fires);
    h->names = calloc((size_t)n_params + 1, sizeof *h->names);
    if (!h->fires || !h->names)
        return error_set(ST_RUN, "out of memory counting gradient hooks");
    for (int i = 0; i < n_params; i++) {
        snprintf(h->names[i], sizeof h->names[i], "%s", params[i]->name);
        int st = var_register_hook(params[i], count_fire, h);
        if (st)
            return st;
    }
    return ST_OK;
}

void hook_counts_free(struct hook_counts *h)
{
    free(h->fires);
    free(h->names);
    memset(h, 0, sizeof *h);
}

/* grad(): the leaves' gradients, set as their .grad as a training loop
 * using autograd.grad does. */
static int backward_by_grad(struct var *loss, struct var *const *leaves, int n)
{
    tensor **grads = calloc((size_t)n + 1, sizeof *grads);
    if (!grads)
        return error_set(ST_RUN, "out of memory for gradients");
    struct backward_options plain = {0};
    int st = tape_grad_with(&loss, NULL, 1, leaves, n, grads, &plain);
    for (int i = 0; i < n; i++) {
        if (!st && grads[i]) {
            tensor_free(leaves[i]->grad);
            leaves[i]->grad = grads[i];
        } else {
            tensor_free(grads[i]);
        }
    }
    free(grads);
    return st;
}

int step_backward(enum backward_api api, struct var *loss, struct var *const *params, int n_params, struct var *x,
                  struct hook_counts *h, int step)
{
    struct var **wanted = calloc((size_t)n_params + 2, sizeof *wanted);
    int n = 0, st = ST_OK;
    if (!wanted)
        return error_set(ST_RUN, "out of memory for the backward's inputs");
    for (int i = 0; i <= n_params; i++) {
        struct var *v = i < n_params ? params[i] : x;
        if (v && v->requires_grad)
            wanted[n++] = v;
    }
    int counted = h && step >= 1 && step <= h->steps;
    for (int call = 0; call < backward_calls_per_step(api) && !st; call++) {
        if (counted)
            h->current = (step - 1) * h->calls + call;
        if (api == BACKWARD_GRAD) {
            st = backward_by_grad(loss, wanted, n);
        } else {
            struct backward_options o = {0};
            if (api == BACKWARD_INPUTS) {
                o.inputs = wanted;
                o.n_inputs = n;
            }
            /* twice: the first call keeps the graph for the second. */
            o.retain_graph = api == BACKWARD_TWICE && call == 0;
            st = tape_backward_with(&loss, NULL, 1, &o);
        }
        if (h)
            h->current = -1;
    }
    free(wanted);
    return st;
}

int hook_counts_record(const struct hook_counts *h, struct run_record *rec)
{
    char path[RUN_PATH_MAX];
    for (int i = 0; i < h->n_params; i++) {
        struct host_tensor t;
        int64_t shape[2] = {h->steps, h->calls};
        int st = host_tensor_alloc(&t, DT_I64, 2, shape);
        if (st)
            return st;
        int64_t *v = t.data;
        for (int k = 0; k < h->steps * h->calls; k++)
            v[k] = h->fires[(size_t)k * (size_t)h->n_params + (size_t)i];
        snprintf(path, sizeof path, "checks/hook_fires/%s", h->names[i]);
        st = run_record_add(rec, path, &t);
        host_tensor_free(&t);
        if (st)
            return st;
    }
    return ST_OK;
}
