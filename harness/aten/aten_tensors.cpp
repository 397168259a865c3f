/* aten_tensors.cpp: tensor handles in aten.h's C API: made from and copied
 * back to host tensors bit for bit, shared and freed, inspected (shape,
 * dtype, device, data pointers, version), created by the factories, and
 * reshaped, converted or moved. Every entry point runs its body through
 * shim::guarded (shim.hpp), so no C++ exception reaches C. */
#include "shim.hpp"

#include <cstring>
#include <vector>

using shim::dims;
using shim::from_device;
using shim::from_scalar_type;
using shim::guarded;
using shim::guarded_or;
using shim::produce;
using shim::ref;
using shim::shim_error;
using shim::to_device;
using shim::to_scalar_type;

namespace {

at::TensorOptions options(enum dtype dt, int device)
{
    return at::TensorOptions().dtype(to_scalar_type(dt)).device(to_device(device));
}

} // namespace

/* ======================================================================
 * tensor handles
 * ==================================================================== */

int tensor_from_host(tensor **out, const struct host_tensor *src, int device)
{
    return produce(__func__, out, [&] {
        if (!src)
            throw shim_error(ST_INTERNAL, "NULL host tensor");
        at::IntArrayRef shape = dims(src->ndim, src->shape);
        at::TensorOptions host_opts = options(src->dtype, DEVICE_CPU);
        size_t nbytes = src->numel * dtype_size(src->dtype);
        if (nbytes && !src->data)
            throw shim_error(ST_INTERNAL, "host tensor without data");
        int64_t numel = 1;
        for (int64_t d : shape)
            numel *= d;
        if ((int64_t)src->numel != numel)
            throw shim_error(ST_INTERNAL, "host tensor numel does not match its shape");
        if (device == DEVICE_CPU) {
            /* memcpy, not copy_: bytes in, the same bytes out (NaN payloads too). */
            at::Tensor t = at::empty(shape, host_opts);
            if (nbytes)
                memcpy(t.data_ptr(), src->data, nbytes);
            return t;
        }
        /* A host-to-device copy is a byte copy as well (from_blob wraps the
         * host buffer without copying; .to makes the device tensor). */
        return at::from_blob(src->data, shape, host_opts).to(to_device(device));
    });
}

int tensor_to_host(const tensor *t, struct host_tensor *out)
{
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output");
        at::Tensor c = ref(t).detach();
        if (!c.is_cpu())
            c = c.to(at::kCPU);
        c = c.contiguous();
        if (c.dim() > HOST_TENSOR_MAX_DIMS)
            throw shim_error(ST_INTERNAL, "rank " + std::to_string(c.dim()) + " exceeds " +
                                              std::to_string(HOST_TENSOR_MAX_DIMS));
        /* Host copies are plain malloc, outside the counting allocator:
         * they pass the same check, or a case too big for memory would get
         * the process killed while copying instead of failing here. */
        char why[256];
        if (ckpt_memory_refuses(c.nbytes(), why, sizeof why))
            return error_set(ST_RUN, "tensor_to_host: out of memory for a host copy: %s", why);
        int st = host_tensor_alloc(out, from_scalar_type(c.scalar_type()), (int)c.dim(),
                                   c.sizes().data());
        if (st != ST_OK)
            return st;
        if (c.nbytes())
            memcpy(out->data, c.data_ptr(), c.nbytes());
        return (int)ST_OK;
    });
}

int tensor_share(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t); });
}

void tensor_free(tensor *t) { delete t; /* at::Tensor's destructor does not throw */ }

int tensor_ndim(const tensor *t)
{
    return guarded_or(__func__, -1, [&] { return (int)ref(t).dim(); });
}

int64_t tensor_size(const tensor *t, int dim)
{
    return guarded_or(__func__, (int64_t)-1, [&] { return ref(t).size(dim); });
}

int tensor_shape(const tensor *t, int64_t *shape)
{
    return guarded_or(__func__, -1, [&] {
        const at::Tensor &x = ref(t);
        if (!shape)
            throw shim_error(ST_INTERNAL, "NULL shape");
        if (x.dim() > TENSOR_MAX_DIMS)
            throw shim_error(ST_INTERNAL, "rank " + std::to_string(x.dim()) + " exceeds " +
                                              std::to_string(TENSOR_MAX_DIMS));
        for (int64_t i = 0; i < x.dim(); i++)
            shape[i] = x.size(i);
        return (int)x.dim();
    });
}

enum dtype tensor_dtype(const tensor *t)
{
    return guarded_or(__func__, DT_COUNT, [&] { return from_scalar_type(ref(t).scalar_type()); });
}

int tensor_device(const tensor *t)
{
    return guarded_or(__func__, DEVICE_CPU, [&] { return from_device(ref(t).device()); });
}

size_t tensor_numel(const tensor *t)
{
    return guarded_or(__func__, (size_t)0, [&] { return (size_t)ref(t).numel(); });
}

size_t tensor_nbytes(const tensor *t)
{
    return guarded_or(__func__, (size_t)0, [&] { return (size_t)ref(t).nbytes(); });
}

int tensor_is_contiguous(const tensor *t)
{
    return guarded_or(__func__, 0, [&] { return ref(t).is_contiguous() ? 1 : 0; });
}

void *tensor_data(tensor *t)
{
    return guarded_or(__func__, (void *)nullptr, [&]() -> void * {
        const at::Tensor &x = ref(t);
        return x.is_cpu() && x.is_contiguous() ? x.data_ptr() : nullptr;
    });
}

const void *tensor_data_const(const tensor *t)
{
    return guarded_or(__func__, (const void *)nullptr, [&]() -> const void * {
        const at::Tensor &x = ref(t);
        return x.is_cpu() && x.is_contiguous() ? x.data_ptr() : nullptr;
    });
}

void *tensor_raw_data(tensor *t)
{
    return guarded_or(__func__, (void *)nullptr, [&]() -> void * {
        const at::Tensor &x = ref(t);
        return x.is_contiguous() ? x.data_ptr() : nullptr;
    });
}

const void *tensor_raw_data_const(const tensor *t)
{
    return guarded_or(__func__, (const void *)nullptr, [&]() -> const void * {
        const at::Tensor &x = ref(t);
        return x.is_contiguous() ? x.data_ptr() : nullptr;
    });
}

const void *tensor_storage_id(const tensor *t)
{
    return guarded_or(__func__, (const void *)nullptr, [&]() -> const void * {
        return ref(t).storage().unsafeGetStorageImpl();
    });
}

int64_t tensor_version(const tensor *t)
{
    return guarded_or(__func__, (int64_t)-1, [&]() -> int64_t { return (int64_t)ref(t)._version(); });
}

/* ======================================================================
 * factories (random ones draw from the device's default generator)
 * ==================================================================== */

int tensor_empty(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device)
{
    return produce(__func__, out,
                   [&] { return at::empty(dims(ndim, shape), options(dt, device)); });
}

int tensor_zeros(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device)
{
    return produce(__func__, out,
                   [&] { return at::zeros(dims(ndim, shape), options(dt, device)); });
}

int tensor_zeros_like(tensor **out, const tensor *like)
{
    return produce(__func__, out, [&] { return at::zeros_like(ref(like)); });
}

int tensor_full(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device,
                double value)
{
    return produce(__func__, out,
                   [&] { return at::full(dims(ndim, shape), value, options(dt, device)); });
}

int tensor_randn(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device,
                 double std)
{
    return produce(__func__, out, [&] {
        return at::empty(dims(ndim, shape), options(dt, device)).normal_(0.0, std);
    });
}

int tensor_uniform(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device,
                   double lo, double hi)
{
    return produce(__func__, out, [&] {
        return at::empty(dims(ndim, shape), options(dt, device)).uniform_(lo, hi);
    });
}

int tensor_randint(tensor **out, int64_t classes, int ndim, const int64_t *shape, int device)
{
    return produce(__func__, out, [&] {
        return at::randint(classes, dims(ndim, shape), options(DT_I64, device));
    });
}

/* ======================================================================
 * shape and type
 * ==================================================================== */

int tensor_reshape(tensor **out, const tensor *t, int ndim, const int64_t *shape)
{
    /* -1 is allowed here (inferred dim), so no dims() check on values. */
    return produce(__func__, out, [&] {
        if (ndim < 0 || ndim > TENSOR_MAX_DIMS || (ndim > 0 && !shape))
            throw shim_error(ST_INTERNAL, "bad reshape target");
        return ref(t).reshape(at::IntArrayRef(shape, (size_t)ndim));
    });
}

int tensor_transpose(tensor **out, const tensor *t, int dim0, int dim1)
{
    return produce(__func__, out, [&] { return ref(t).transpose(dim0, dim1); });
}

int tensor_contiguous(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).contiguous(); });
}

int tensor_clone(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).clone(); });
}

int tensor_to_dtype(tensor **out, const tensor *t, enum dtype dt)
{
    return produce(__func__, out, [&] { return ref(t).to(to_scalar_type(dt)); });
}

int tensor_to_device(tensor **out, const tensor *t, int device)
{
    return produce(__func__, out, [&] { return ref(t).to(to_device(device)); });
}

int tensor_narrow(tensor **out, const tensor *t, int dim, int64_t start, int64_t len)
{
    return produce(__func__, out, [&] { return ref(t).narrow(dim, start, len); });
}

int tensor_cat(tensor **out, const tensor *const *ts, int n, int dim)
{
    return produce(__func__, out, [&] {
        if (n <= 0 || !ts)
            throw shim_error(ST_INTERNAL, "cat of no tensors");
        std::vector<at::Tensor> parts;
        parts.reserve((size_t)n);
        for (int i = 0; i < n; i++)
            parts.push_back(ref(ts[i]));
        return at::cat(parts, dim);
    });
}
