/* host_tensor: a tensor's bytes in host memory with its dtype and shape.
 * What the recorder writes, the reader returns and compare consumes; it owns
 * its buffer (host_tensor_free). Independent of libtorch. */
#ifndef CKPT_HOST_TENSOR_H
#define CKPT_HOST_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define HOST_TENSOR_MAX_DIMS 8

struct host_tensor {
    enum dtype dtype;
    int ndim;
    int64_t shape[HOST_TENSOR_MAX_DIMS];
    size_t numel;
    void *data; /* numel * dtype_size(dtype) bytes, C order */
};

/* Allocates zeroed storage; returns ST_OK or ST_INTERNAL. */
int host_tensor_alloc(struct host_tensor *t, enum dtype dtype, int ndim, const int64_t *shape);
void host_tensor_free(struct host_tensor *t);
size_t host_tensor_bytes(const struct host_tensor *t);
/* "[2, 3, 4]" into buf. */
const char *host_tensor_shape_str(const struct host_tensor *t, char *buf, size_t len);
/* Turns a flat index into "[i, j, k]". */
const char *host_tensor_index_str(const struct host_tensor *t, size_t flat, char *buf, size_t len);

#endif
