/* case_fit: a case whose tensors cannot fit the memory limit is refused
 * from its shapes, before any allocation (harness/train/case_fit.h). */
#include "case_fit.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "aten/aten.h"
#include "case_text.h"
#include "dtype.h"
#include "error.h"
#include "model.h"

/* All parameters' bytes and the input's (x; target is the same shape). */
static void model_bytes(const struct model *m, double *params, double *input)
{
    double elem = (double)dtype_size(m->dtype);
    *params = 0;
    for (int i = 0; i < m->n_params; i++) {
        double n = 1;
        for (int k = 0; k < m->params[i].ndim; k++)
            n *= (double)m->params[i].shape[k];
        *params += n * elem;
    }
    int64_t shape[3];
    model_input_shape(m, shape);
    *input = (double)shape[0] * (double)shape[1] * (double)shape[2] * elem;
}

int64_t case_fit_min_bytes(const struct ckpt_case *c)
{
    struct model m;
    if (model_create(&m, c, DEVICE_CPU))
        return -1;
    double params, input;
    model_bytes(&m, &params, &input);
    struct segment_plan plain;
    segment_plan_make(&plain, m.layers, SEGMENTS_NONE);
    double saved = (double)model_predict_saved_bytes(&m, &plain);
    model_free(&m);
    /* x and target, the parameters and what the plain forward saves. */
    double need = params + 2 * input + (saved > 0 ? saved : 0);
    return need >= 9.2e18 ? INT64_MAX : (int64_t)need;
}

int case_fit_check(const struct ckpt_case *c)
{
    int device = DEVICE_CPU;
    if (c->device[0] && aten_parse_device(c->device, &device) == ST_OK && device != DEVICE_CPU)
        return ST_OK; /* the device's own memory; its allocator refuses */
    error_clear();
    int64_t limit = ckpt_counting_allocator_limit();
    if (limit <= 0)
        return ST_OK; /* a malformed CKPT_MEMORY_LIMIT: aten_init says so */
    int64_t need = case_fit_min_bytes(c);
    if (need < 0)
        return error_wrap(ST_INPUT, "%s:%d: case %s", c->file, c->line, c->name);
    if (need <= limit)
        return ST_OK;
    char a[32], b[32];
    return error_set(ST_INPUT, "%s:%d: case %s needs at least %s (parameters, input, target and the predicted "
                     "saved activations), more than the %s memory limit (%s); nothing run",
                     c->file, c->line, c->name, text_format_bytes((double)need, a, sizeof a),
                     text_format_bytes((double)limit, b, sizeof b), ckpt_counting_allocator_limit_source());
}

int case_fit_report_bytes(const struct ckpt_case *c, double *least, double *most)
{
    struct model m;
    if (model_create(&m, c, DEVICE_CPU))
        return error_wrap(ST_INPUT, "%s:%d: case %s", c->file, c->line, c->name);
    double params, input;
    model_bytes(&m, &params, &input);
    model_free(&m);
    /* A run: each step's gradients (and the input's), the final parameters. */
    double run = (double)c->steps * (params + input) + params;
    int runs = 2 + c->n_impls;
    *least = 2 * input + params + run;
    *most = 2 * input + params + runs * run;
    return ST_OK;
}

int case_fit_check_disk(const struct ckpt_case *c, const char *dir)
{
    double least, most;
    int st = case_fit_report_bytes(c, &least, &most);
    if (st)
        return st;
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0)
        return ST_OK; /* the report's own creation says what is wrong with dir */
    double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && (double)lim.rlim_cur < free_bytes)
        free_bytes = (double)lim.rlim_cur;
    if (least <= free_bytes)
        return ST_OK;
    char a[32], b[32], f[32];
    return error_set(ST_RUN, "case %s: its report needs at least %s (the initial parameters and one run's gradients "
                     "and final parameters; up to %s when no run is bitwise identical to baseline_0), more than the "
                     "%s %s has room for; nothing run", c->name, text_format_bytes(least, a, sizeof a),
                     text_format_bytes(most, b, sizeof b), text_format_bytes(free_bytes, f, sizeof f), dir);
}
