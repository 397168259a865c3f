/* shim.cpp: what shim.hpp declares. The exception translation behind
 * shim::guarded (the only catch list in the shim), the dtype and device
 * mappings, and the checks the shim's files share on what C hands them. */
#include "shim.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using shim::shim_error;

/* ======================================================================
 * The exception translation behind the guard (the only catch list).
 * ==================================================================== */
namespace {

/* Length of the first line of msg: c10 messages carry context lines and, in
 * what(), a multi-line backtrace; the error slot holds one line. Counting
 * instead of copying keeps the catch handlers free of allocations (a throw
 * from inside a handler of a noexcept function would terminate). */
int first_line_len(const char *msg)
{
    size_t n = strcspn(msg, "\r\n");
    return n > 1000 ? 1000 : (int)n;
}

int report(int status, const char *op, const char *msg)
{
    if (!msg || !*msg)
        msg = "unknown error";
    return error_set(status, "%s: %.*s", op, first_line_len(msg), msg);
}

bool looks_like_oom(const char *msg)
{
    return strstr(msg, "out of memory") || strstr(msg, "not enough memory");
}

} // namespace

int shim::fail_in_flight(const char *op) noexcept
{
    try {
        throw;
    } catch (const shim_error &e) {
        return report(e.status, op, e.what());
    } catch (const c10::OutOfMemoryError &e) {
        /* CPU: our counting allocator ("tried to allocate N bytes");
         * CUDA: the caching allocator ("Tried to allocate 2.00 GiB ..."). */
        return report(ST_RUN, op, e.what_without_backtrace());
    } catch (const c10::Error &e) {
        /* what_without_backtrace: what() would symbolise a backtrace first. A
         * plain c10::Error can still be an allocation failure (the default
         * CPU allocator's, when ours is not installed). */
        const char *msg = e.what_without_backtrace();
        return report(looks_like_oom(msg) ? ST_RUN : ST_INTERNAL, op, msg);
    } catch (const std::bad_alloc &) {
        return error_set(ST_RUN, "%s: out of memory (std::bad_alloc, size unknown)", op);
    } catch (const std::exception &e) {
        return report(ST_INTERNAL, op, e.what());
    } catch (...) {
        return error_set(ST_INTERNAL, "%s: unknown C++ exception", op);
    }
}

/* ======================================================================
 * dtype and device mappings
 * ==================================================================== */

at::ScalarType shim::to_scalar_type(enum dtype d)
{
    switch (d) {
    case DT_F32: return at::kFloat;
    case DT_BF16: return at::kBFloat16;
    case DT_F16: return at::kHalf;
    case DT_F64: return at::kDouble;
    case DT_I64: return at::kLong;
    case DT_U8: return at::kByte;
    case DT_BOOL: return at::kBool;
    default: break;
    }
    throw shim_error(ST_INTERNAL, "unknown dtype " + std::to_string((int)d));
}

enum dtype shim::from_scalar_type(at::ScalarType s)
{
    switch (s) {
    case at::kFloat: return DT_F32;
    case at::kBFloat16: return DT_BF16;
    case at::kHalf: return DT_F16;
    case at::kDouble: return DT_F64;
    case at::kLong: return DT_I64;
    case at::kByte: return DT_U8;
    case at::kBool: return DT_BOOL;
    default: break;
    }
    throw shim_error(ST_INTERNAL, std::string("ATen dtype ") + c10::toString(s) +
                                      " has no harness dtype");
}

at::Device shim::to_device(int device)
{
    if (device == DEVICE_CPU)
        return at::Device(at::kCPU);
    if (device < 0)
        throw shim_error(ST_INPUT, "invalid device id " + std::to_string(device));
#ifdef CKPT_WITH_CUDA
    return at::Device(at::kCUDA, (c10::DeviceIndex)device);
#else
    throw shim_error(ST_INPUT, "device cuda:" + std::to_string(device) +
                                   " requested but this libtorch has no CUDA");
#endif
}

int shim::from_device(const at::Device &d)
{
    if (d.is_cpu())
        return DEVICE_CPU;
    if (d.is_cuda())
        return d.has_index() ? (int)d.index() : 0;
    throw shim_error(ST_INTERNAL, "tensor on unsupported device " + d.str());
}

int shim::give_all(const std::vector<std::pair<tensor **, at::Tensor>> &items)
{
    /* Handles are owned here until every one exists, so a failure half-way
     * (which throws) frees them; reserve first so that keeping one cannot. */
    std::vector<std::unique_ptr<tensor>> made;
    made.reserve(items.size());
    for (const auto &it : items) {
        tensor *h = nullptr;
        if (it.first && it.second.defined()) {
            h = new (std::nothrow) tensor{it.second};
            if (!h)
                throw shim_error(ST_RUN, "out of memory allocating a tensor handle");
        }
        made.emplace_back(h);
    }
    for (size_t i = 0; i < items.size(); i++)
        if (items[i].first)
            *items[i].first = made[i].release();
    return ST_OK;
}

at::IntArrayRef shim::dims(int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS)
        throw shim_error(ST_INTERNAL, "rank " + std::to_string(ndim) + " outside 0.." +
                                          std::to_string(TENSOR_MAX_DIMS));
    if (ndim > 0 && !shape)
        throw shim_error(ST_INTERNAL, "NULL shape");
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            throw shim_error(ST_INTERNAL, "negative dimension " + std::to_string(shape[i]));
    return at::IntArrayRef(shape, (size_t)ndim);
}
