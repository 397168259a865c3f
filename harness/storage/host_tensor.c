#include "host_tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

int host_tensor_alloc(struct host_tensor *t, enum dtype dtype, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    if (ndim < 0 || ndim > HOST_TENSOR_MAX_DIMS)
        return error_set(ST_INTERNAL, "tensor rank %d exceeds %d", ndim, HOST_TENSOR_MAX_DIMS);
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    size_t size = dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return error_set(ST_INTERNAL, "negative dimension %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
        /* Shapes can come from a file: a product that wraps would allocate
         * a small buffer for a large read. */
        if (shape[i] > 0 && t->numel > SIZE_MAX / (size ? size : 1) / (size_t)shape[i]) {
            t->numel = 0;
            return error_set(ST_RUN, "out of memory: a host tensor of rank %d would need more than %zu bytes",
                             ndim, SIZE_MAX);
        }
        t->numel *= (size_t)shape[i];
    }
    size_t bytes = t->numel * size;
    t->data = calloc(bytes ? bytes : 1, 1);
    if (!t->data)
        return error_set(ST_RUN, "out of memory allocating %zu bytes for a host tensor", bytes);
    return ST_OK;
}

void host_tensor_free(struct host_tensor *t)
{
    free(t->data);
    t->data = NULL;
    t->numel = 0;
}

size_t host_tensor_bytes(const struct host_tensor *t) { return t->numel * dtype_size(t->dtype); }

const char *host_tensor_shape_str(const struct host_tensor *t, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
    return buf;
}

const char *host_tensor_index_str(const struct host_tensor *t, size_t flat, char *buf, size_t len)
{
    int64_t idx[HOST_TENSOR_MAX_DIMS];
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t d = t->shape[i] ? t->shape[i] : 1;
        idx[i] = (int64_t)(flat % (size_t)d);
        flat /= (size_t)d;
    }
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
    return buf;
}
