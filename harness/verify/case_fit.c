/* case_fit: a case whose tensors cannot fit the memory limit is refused
 * from its shapes, before any allocation (harness/verify/case_fit.h). */
#include "case_fit.h"

#include <stdio.h>
#include <string.h>

#include "aten/aten.h"
#include "case_text.h"
#include "dtype.h"
#include "error.h"
#include "model.h"

int64_t case_fit_min_bytes(const struct ckpt_case *c)
{
    struct model m;
    if (model_create(&m, c, DEVICE_CPU))
        return -1;
    double elem = (double)dtype_size(m.dtype), params = 0;
    for (int i = 0; i < m.n_params; i++) {
        double n = 1;
        for (int k = 0; k < m.params[i].ndim; k++)
            n *= (double)m.params[i].shape[k];
        params += n * elem;
    }
    int64_t shape[3];
    model_input_shape(&m, shape);
    double input = (double)shape[0] * (double)shape[1] * (double)shape[2] * elem;
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
