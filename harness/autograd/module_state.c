#include "module_state.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "error.h"

static void free_buffers(tensor **ts, int n)
{
    if (!ts)
        return;
    for (int i = 0; i < n; i++)
        tensor_free(ts[i]);
    free(ts);
}

/* n copies of src (NULL on failure, everything freed). */
static int copy_buffers(tensor ***out, tensor *const *src, int n)
{
    *out = NULL;
    if (n == 0)
        return ST_OK;
    tensor **ts = calloc((size_t)n, sizeof *ts);
    if (!ts)
        return error_set(ST_RUN, "out of memory copying module state");
    for (int i = 0; i < n; i++) {
        int st = tensor_clone(&ts[i], src[i]);
        if (st) {
            free_buffers(ts, n);
            return error_wrap(st, "copying module state");
        }
    }
    *out = ts;
    return ST_OK;
}

int module_state_init(struct module_state *s, const struct module_buffer *layout, int n, int device)
{
    memset(s, 0, sizeof *s);
    s->layout = layout;
    s->device = device;
    if (n == 0)
        return ST_OK;
    if (!(s->live = calloc((size_t)n, sizeof *s->live)))
        return error_set(ST_RUN, "out of memory for module state");
    s->n = n;
    for (int i = 0; i < n; i++) {
        const struct module_buffer *b = &layout[i];
        int st = tensor_full(&s->live[i], b->dtype, b->ndim, b->shape, device, b->init);
        if (st) {
            module_state_free(s);
            return error_wrap(st, "creating buffer %s", b->name);
        }
    }
    s->read = s->write = s->live;
    return ST_OK;
}

void module_state_free(struct module_state *s)
{
    free_buffers(s->live, s->n);
    memset(s, 0, sizeof *s);
}

tensor *module_state_read(const struct module_state *s, int i)
{
    return s->read[i];
}

tensor *module_state_write(const struct module_state *s, int i)
{
    return s->write[i];
}

int module_state_snapshot(const struct module_state *s, struct state_snapshot *out)
{
    out->n = s->n;
    return copy_buffers(&out->buffers, s->read, s->n);
}

void state_snapshot_free(struct state_snapshot *snap)
{
    free_buffers(snap->buffers, snap->n);
    snap->buffers = NULL;
    snap->n = 0;
}

int module_state_recompute_enter(struct module_state *s, const struct state_snapshot *snap, enum state_replay how,
                                 struct state_recompute *frame)
{
    memset(frame, 0, sizeof *frame);
    frame->previous_read = s->read;
    frame->previous_write = s->write;
    if (s->n == 0 || how == STATE_LIVE)
        return ST_OK;
    if (snap->n != s->n)
        return error_set(ST_INTERNAL, "state snapshot of %d buffers for a model with %d", snap->n, s->n);
    int st = copy_buffers(&frame->scratch, how == STATE_READ_LIVE ? s->live : snap->buffers, s->n);
    if (st)
        return st;
    frame->n = s->n;
    s->read = frame->scratch;
    s->write = how == STATE_WRITE_LIVE ? s->live : frame->scratch;
    return ST_OK;
}

void module_state_recompute_exit(struct module_state *s, struct state_recompute *frame)
{
    s->read = frame->previous_read;
    s->write = frame->previous_write;
    free_buffers(frame->scratch, frame->n);
    frame->scratch = NULL;
    frame->n = 0;
}

int64_t module_state_bytes(const struct module_buffer *layout, int n)
{
    int64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        int64_t elems = 1;
        for (int d = 0; d < layout[i].ndim; d++)
            elems *= layout[i].shape[d];
        bytes += elems * (int64_t)dtype_size(layout[i].dtype);
    }
    return bytes;
}
