/* shim.hpp: what the shim's C++ files (aten_*.cpp, oracle.cpp) share and
 * the C side never sees: the tensor handle's layout, the one exception guard
 * that keeps C++ exceptions from crossing into C, the dtype/device mappings
 * and the shape check (defined in shim.cpp).
 * Internal to harness/aten/; never include it from C. The shim's files
 * compile unchanged against libtorch 1.13 and 2.x; the one API difference
 * that matters (c10::Allocator) is handled with TORCH_VERSION_MAJOR/MINOR in
 * counting_allocator.cpp. */
#ifndef CKPT_ATEN_SHIM_HPP
#define CKPT_ATEN_SHIM_HPP

#include <ATen/ATen.h>

#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

extern "C" {
/* error.h, dtype.h and host_tensor.h are plain C headers without extern "C"
 * guards of their own. aten.h includes the latter two inside its extern "C"
 * block already; they are include-guarded, so wrapping them here is harmless. */
#include "dtype.h"
#include "../error.h"
#include "host_tensor.h"
}
#include "aten.h"

/* A handle is an at::Tensor by value: copying a handle (tensor_share) shares
 * storage exactly as copying an at::Tensor does. */
struct tensor {
    at::Tensor t;
};

namespace shim {

/* An error the shim raises itself, carrying the status the C caller gets
 * (ST_INPUT for a bad device string, ST_INTERNAL for a NULL handle...). */
struct shim_error : std::runtime_error {
    int status;
    shim_error(int st, const std::string &msg) : std::runtime_error(msg), status(st) {}
};

/* Translates the exception in flight into a status and a one-line message
 * naming `op`. Only call it from inside a catch block (it rethrows to find
 * out what was caught). */
int fail_in_flight(const char *op) noexcept;

/* THE guard: every C entry point runs its body through this. body returns a
 * status; any exception becomes a status via fail_in_flight. */
template <class F>
int guarded(const char *op, F &&body) noexcept
{
    try {
        return body();
    } catch (...) {
        return fail_in_flight(op);
    }
}

/* For the few C functions that return a value instead of a status (sizes,
 * item, ...): on an exception the message is set and `fallback` returned.
 * Built on guarded so there is still one try/catch. */
template <class T, class F>
T guarded_or(const char *op, T fallback, F &&body) noexcept
{
    T result = fallback;
    int st = guarded(op, [&] {
        result = body();
        return (int)ST_OK;
    });
    return st == ST_OK ? result : fallback;
}

/* The handle's tensor, or a shim_error for a NULL handle. */
inline const at::Tensor &ref(const tensor *h)
{
    if (!h)
        throw shim_error(ST_INTERNAL, "NULL tensor handle");
    return h->t;
}

/* Hands `v` to the caller as a new handle in *out (throws on failure, so the
 * guard names the op). */
inline int give(tensor **out, at::Tensor v)
{
    if (!out)
        throw shim_error(ST_INTERNAL, "NULL output pointer");
    *out = new (std::nothrow) tensor{std::move(v)};
    if (!*out)
        throw shim_error(ST_RUN, "out of memory allocating a tensor handle");
    return ST_OK;
}

/* One-output ops: *out is NULL unless the op succeeded. */
template <class F>
int produce(const char *op, tensor **out, F &&make) noexcept
{
    if (out)
        *out = nullptr;
    return guarded(op, [&] { return give(out, make()); });
}

/* Hands out several results at once: all or none (on a failure, which
 * throws, the handles already made are freed and no slot is written). A NULL
 * slot means "not wanted"; an undefined result (a gradient ATen did not
 * compute) gives NULL. Callers NULL their out slots before the guard. */
int give_all(const std::vector<std::pair<tensor **, at::Tensor>> &items);

/* A checked view of a C shape array (rank within TENSOR_MAX_DIMS, no
 * negative dimension, no NULL shape for a rank above 0). */
at::IntArrayRef dims(int ndim, const int64_t *shape);

at::ScalarType to_scalar_type(enum dtype d);       /* throws for an unknown dtype */
enum dtype from_scalar_type(at::ScalarType s);      /* throws for a dtype the harness lacks */
at::Device to_device(int device);                   /* throws ST_INPUT without CUDA */
int from_device(const at::Device &d);

} // namespace shim

#endif
