/* aten.cpp: the C API of aten.h over ATen. Every entry point runs its body
 * through shim::guarded (shim.hpp), so no C++ exception reaches C: a failure
 * becomes a status and a one-line message naming the entry point.
 *
 * Ops call the very ATen kernels torch autograd calls for the same op
 * (native_layer_norm, _softmax_backward_data, nll_loss_backward, ...), so on
 * one device the harness's gradients can be bitwise equal to torch's.
 * Tensors made here never require grad, so ATen records no autograd graph for
 * them; only oracle.cpp builds graphs, on detached copies.
 *
 * CUDA-only code sits behind CKPT_WITH_CUDA (set by the build when libtorch
 * has CUDA). Everything here compiles unchanged against libtorch 1.13 and
 * 2.x; the one API difference that matters (c10::Allocator) is handled with
 * TORCH_VERSION_MAJOR/MINOR in counting_allocator.cpp. */
#include "shim.hpp"
#include "torch_runtime.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#ifdef CKPT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

using shim::guarded;
using shim::guarded_or;
using shim::produce;
using shim::ref;
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

namespace {

using shim::from_device;
using shim::from_scalar_type;
using shim::give_all;
using shim::to_device;
using shim::to_scalar_type;

at::TensorOptions options(enum dtype dt, int device)
{
    return at::TensorOptions().dtype(to_scalar_type(dt)).device(to_device(device));
}

/* A checked view of a C shape array. */
at::IntArrayRef dims(int ndim, const int64_t *shape)
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

/* An optional tensor argument (b, w) from a maybe-NULL handle. */
c10::optional<at::Tensor> opt(const tensor *h)
{
    c10::optional<at::Tensor> o;
    if (h)
        o = h->t;
    return o;
}

void null_outs(std::initializer_list<tensor **> outs)
{
    for (tensor **o : outs)
        if (o)
            *o = nullptr;
}

at::Generator default_generator(int device)
{
    /* Generator is a shared handle: this copy is the device's default
     * generator itself, not a clone. defaultGenerator also lazily initialises
     * CUDA for a CUDA device. */
    return at::globalContext().defaultGenerator(to_device(device));
}

#ifdef CKPT_WITH_CUDA
/* The caching allocator keeps statistics only once CUDA is initialised for
 * the process (before that getDeviceStats throws "did you call init?"). An
 * empty tensor on the device makes ATen run its own lazy init, whatever its
 * version calls it; it allocates nothing. */
void cuda_lazy_init(int device)
{
    (void)at::empty({0}, at::TensorOptions().dtype(at::kFloat).device(to_device(device)));
}
#endif

int cuda_device_count()
{
#ifdef CKPT_WITH_CUDA
    return (int)c10::cuda::device_count(); /* 0 when no driver or device */
#else
    return 0;
#endif
}

/* Entries above the diagonal of the last two dims (j > i): the future
 * positions causal attention must not see. */
at::Tensor causal_mask(const at::Tensor &s)
{
    if (s.dim() < 2)
        throw shim_error(ST_INTERNAL, "causal mask needs at least 2 dims, got " +
                                          std::to_string(s.dim()));
    return at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).triu(1);
}

/* The classes dim last, flattened to the [N, C] / [N] that nll_loss takes. */
at::Tensor rows(const at::Tensor &logits) { return logits.reshape({-1, logits.size(-1)}); }

} // namespace

/* ======================================================================
 * process set-up
 * ==================================================================== */

int aten_init(void)
{
    return guarded(__func__, [] {
        if (ckpt_counting_allocator_limit() < 0)
            return error_set(ST_INPUT, "CKPT_MEMORY_LIMIT='%s': not a byte count (for example 512M or 8G)",
                             getenv("CKPT_MEMORY_LIMIT"));
        return ckpt_install_counting_allocator();
    });
}

/* The full version of the torch compiled against ("2.11.0+cu130": the local
 * tag names its CUDA build), which torch_runtime_check holds equal to the
 * running one. */
const char *aten_libtorch_version(void) { return torch_compiled_version(); }

int aten_cuda_available(void)
{
    return guarded_or(__func__, 0, [] { return cuda_device_count() > 0 ? 1 : 0; });
}

int aten_built_with_cuda(void)
{
#ifdef CKPT_WITH_CUDA
    return 1;
#else
    return 0;
#endif
}

int aten_device_count(void) { return guarded_or(__func__, 0, [] { return cuda_device_count(); }); }

const char *aten_device_name(int device, char *buf, size_t len)
{
    if (!buf || len == 0)
        return "";
    snprintf(buf, len, "?");
    return guarded_or(__func__, (const char *)buf, [&] {
        if (device == DEVICE_CPU) {
            snprintf(buf, len, "cpu");
        } else {
#ifdef CKPT_WITH_CUDA
            (void)to_device(device);
            snprintf(buf, len, "%s", at::cuda::getDeviceProperties((c10::DeviceIndex)device)->name);
#else
            (void)to_device(device); /* throws: no CUDA */
#endif
        }
        return (const char *)buf;
    });
}

int aten_set_threads(int n)
{
    return guarded(__func__, [&] {
        if (n < 1)
            return error_set(ST_INPUT, "thread count must be >= 1, got %d", n);
        at::set_num_threads(n);
        return (int)ST_OK;
    });
}

int aten_get_threads(void) { return guarded_or(__func__, 1, [] { return at::get_num_threads(); }); }

int aten_synchronize(int device)
{
    return guarded(__func__, [&] {
        (void)to_device(device);
#ifdef CKPT_WITH_CUDA
        if (device != DEVICE_CPU) {
            c10::cuda::CUDAGuard guard((c10::DeviceIndex)device);
            c10::cuda::device_synchronize();
        }
#endif
        return (int)ST_OK;
    });
}

namespace {
/* One line even when the user typed control characters. */
bool printable(const char *s)
{
    for (; *s; s++)
        if (!isprint((unsigned char)*s))
            return false;
    return true;
}
} // namespace

int aten_parse_device(const char *text, int *device)
{
    return guarded(__func__, [&] {
        if (!text || !device)
            throw shim_error(ST_INTERNAL, "NULL argument");
        if (strcmp(text, "cpu") == 0) {
            *device = DEVICE_CPU;
            return (int)ST_OK;
        }
        long idx = -1;
        if (strcmp(text, "cuda") == 0) {
            idx = 0;
        } else if (strncmp(text, "cuda:", 5) == 0) {
            const char *num = text + 5;
            size_t nd = strspn(num, "0123456789");
            if (nd > 0 && nd <= 4 && num[nd] == '\0')
                idx = strtol(num, nullptr, 10);
        }
        if (idx < 0) {
            if (strlen(text) <= 64 && printable(text))
                return error_set(ST_INPUT, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                                 text);
            return error_set(ST_INPUT, "unknown device string (expected cpu, cuda or cuda:N)");
        }
#ifndef CKPT_WITH_CUDA
        return error_set(ST_INPUT, "device cuda:%ld requested but this libtorch has no CUDA", idx);
#else
        int n = cuda_device_count();
        if (idx >= n)
            return error_set(ST_INPUT, "device cuda:%ld requested but %d CUDA device(s) present",
                             idx, n);
        *device = (int)idx;
        return (int)ST_OK;
#endif
    });
}

const char *aten_device_str(int device, char *buf, size_t len)
{
    if (!buf || len == 0)
        return "";
    if (device == DEVICE_CPU)
        snprintf(buf, len, "cpu");
    else
        snprintf(buf, len, "cuda:%d", device);
    return buf;
}

/* ======================================================================
 * memory accounting
 * ==================================================================== */

int aten_mem_stats(int device, struct mem_stats *out)
{
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output");
        (void)to_device(device);
        if (device == DEVICE_CPU) {
            if (!ckpt_counting_allocator_installed())
                throw shim_error(ST_INTERNAL,
                                 "counting CPU allocator not installed (call aten_init first)");
            ckpt_counting_allocator_stats(&out->live_bytes, &out->peak_bytes, &out->alloc_count);
            return (int)ST_OK;
        }
#ifdef CKPT_WITH_CUDA
        cuda_lazy_init(device);
        namespace cca = c10::cuda::CUDACachingAllocator;
        const auto stats = cca::getDeviceStats((c10::DeviceIndex)device);
        /* index 0 is StatType::AGGREGATE (all pools) */
        out->live_bytes = stats.allocated_bytes[0].current;
        out->peak_bytes = stats.allocated_bytes[0].peak;
        out->alloc_count = stats.allocation[0].allocated;
#endif
        return (int)ST_OK;
    });
}

int aten_mem_reset_peak(int device)
{
    return guarded(__func__, [&] {
        (void)to_device(device);
        if (device == DEVICE_CPU) {
            ckpt_counting_allocator_reset_peak();
            return (int)ST_OK;
        }
#ifdef CKPT_WITH_CUDA
        cuda_lazy_init(device);
        c10::cuda::CUDACachingAllocator::resetPeakStats((c10::DeviceIndex)device);
#endif
        return (int)ST_OK;
    });
}

/* ======================================================================
 * default generators
 * Locking: ATen requires callers to hold the generator's mutex around
 * get/set (Note [Acquire lock when using random generators]); torch's Python
 * bindings do the same. Note get_state itself makes a small CPU tensor
 * (about 5 KB for CPU's mt19937), which the counting allocator sees briefly.
 * ==================================================================== */

int aten_rng_get_state(int device, uint8_t **out, size_t *len)
{
    if (out)
        *out = nullptr;
    if (len)
        *len = 0;
    return guarded(__func__, [&] {
        if (!out || !len)
            throw shim_error(ST_INTERNAL, "NULL output");
        at::Generator gen = default_generator(device);
        at::Tensor state;
        {
            std::lock_guard<std::mutex> lock(gen.mutex());
            state = gen.get_state();
        }
        state = state.to(at::kCPU).contiguous();
        size_t n = state.nbytes();
        auto *buf = static_cast<uint8_t *>(malloc(n ? n : 1));
        if (!buf)
            return error_set(ST_RUN, "%s: out of memory copying %zu bytes of RNG state", __func__,
                             n);
        if (n)
            memcpy(buf, state.data_ptr(), n);
        *out = buf;
        *len = n;
        return (int)ST_OK;
    });
}

int aten_rng_set_state(int device, const uint8_t *state, size_t len)
{
    return guarded(__func__, [&] {
        if (!state && len)
            throw shim_error(ST_INTERNAL, "NULL state");
        at::Generator gen = default_generator(device);
        at::Tensor t = at::empty({(int64_t)len}, at::TensorOptions().dtype(at::kByte));
        if (len)
            memcpy(t.data_ptr(), state, len);
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(t); /* validates the size and throws on a mismatch */
        return (int)ST_OK;
    });
}

int aten_rng_manual_seed(int device, uint64_t seed)
{
    return guarded(__func__, [&] {
        at::Generator gen = default_generator(device);
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_current_seed(seed);
        return (int)ST_OK;
    });
}

/* ======================================================================
 * CUDA: streams and Philox reservations for the harness's own kernels
 * ==================================================================== */

namespace {
/* The checks both entry points share; throws in a build without CUDA. */
void require_cuda_device(int device, const char *what)
{
    if (device == DEVICE_CPU)
        throw shim_error(ST_INTERNAL, std::string("the CPU has no ") + what);
    (void)to_device(device); /* ST_INPUT "this libtorch has no CUDA" in a CPU build */
}
} // namespace

int aten_cuda_stream(int device, void **stream)
{
    if (stream)
        *stream = nullptr;
    return guarded(__func__, [&] {
        if (!stream)
            throw shim_error(ST_INTERNAL, "NULL output");
        require_cuda_device(device, "CUDA stream");
#ifdef CKPT_WITH_CUDA
        *stream = static_cast<void *>(at::cuda::getCurrentCUDAStream((c10::DeviceIndex)device).stream());
#endif
        return (int)ST_OK;
    });
}

int aten_cuda_philox_reserve(int device, uint64_t increment, uint64_t *seed, uint64_t *offset)
{
    return guarded(__func__, [&] {
        if (!seed || !offset)
            throw shim_error(ST_INTERNAL, "NULL output");
        require_cuda_device(device, "Philox generator");
        /* ATen keeps offsets multiples of 4 (one Philox4x32 output); an odd
         * increment would be rounded up by some versions and not others. */
        if (increment == 0 || increment % 4 != 0)
            throw shim_error(ST_INTERNAL, "Philox increment " + std::to_string(increment) +
                                              " is not a positive multiple of 4");
#ifdef CKPT_WITH_CUDA
        at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator((c10::DeviceIndex)device);
        std::lock_guard<std::mutex> lock(gen.mutex());
        /* philox_engine_inputs: (seed, offset before the increment), then
         * offset += increment -- the eager-mode half of philox_cuda_state,
         * with plain integers instead of a PhiloxCudaState whose layout
         * changed between releases; it refuses graph capture itself. */
        const std::pair<uint64_t, uint64_t> so =
            at::check_generator<at::CUDAGeneratorImpl>(gen)->philox_engine_inputs(increment);
        *seed = so.first;
        *offset = so.second;
#endif
        return (int)ST_OK;
    });
}

/* ======================================================================
 * timing
 * ==================================================================== */

struct aten_timer {
    int device;
    std::vector<double> host_ms; /* CPU marks */
#ifdef CKPT_WITH_CUDA
    /* CUDAEvent is move-only and destroys its event itself (noexcept). */
    std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;
#endif
    size_t marks() const
    {
#ifdef CKPT_WITH_CUDA
        if (device != DEVICE_CPU)
            return events.size();
#endif
        return host_ms.size();
    }
};

int aten_timer_create(aten_timer **out, int device)
{
    if (out)
        *out = nullptr;
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output");
        (void)to_device(device);
        auto t = std::make_unique<aten_timer>();
        t->device = device;
        *out = t.release();
        return (int)ST_OK;
    });
}

int aten_timer_mark(aten_timer *t)
{
    return guarded(__func__, [&] {
        if (!t)
            throw shim_error(ST_INTERNAL, "NULL timer");
#ifdef CKPT_WITH_CUDA
        if (t->device != DEVICE_CPU) {
            /* cudaEventDefault: timing enabled (ATen's default disables it). */
            auto ev = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
            ev->record(at::cuda::getCurrentCUDAStream((c10::DeviceIndex)t->device));
            t->events.push_back(std::move(ev));
            return (int)ST_OK;
        }
#endif
        const auto now = std::chrono::steady_clock::now().time_since_epoch();
        t->host_ms.push_back(std::chrono::duration<double, std::milli>(now).count());
        return (int)ST_OK;
    });
}

int aten_timer_ms(aten_timer *t, int from, int to, double *ms)
{
    return guarded(__func__, [&] {
        if (!t || !ms)
            throw shim_error(ST_INTERNAL, "NULL argument");
        if (from < 0 || to < from || (size_t)to >= t->marks())
            throw shim_error(ST_INTERNAL, "timer interval " + std::to_string(from) + ".." +
                                              std::to_string(to) + " outside the " +
                                              std::to_string(t->marks()) + " marks made");
#ifdef CKPT_WITH_CUDA
        if (t->device != DEVICE_CPU) {
            t->events[(size_t)to]->synchronize();
            *ms = (double)t->events[(size_t)from]->elapsed_time(*t->events[(size_t)to]);
            return (int)ST_OK;
        }
#endif
        *ms = t->host_ms[(size_t)to] - t->host_ms[(size_t)from];
        return (int)ST_OK;
    });
}

void aten_timer_free(aten_timer *t) { delete t; }

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

/* ======================================================================
 * arithmetic
 * ==================================================================== */

int tensor_add(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::add(ref(a), ref(b)); });
}

int tensor_add_scaled(tensor **out, const tensor *a, const tensor *b, double alpha)
{
    return produce(__func__, out, [&] { return at::add(ref(a), ref(b), alpha); });
}

int tensor_sub(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::sub(ref(a), ref(b)); });
}

int tensor_mul(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::mul(ref(a), ref(b)); });
}

int tensor_div(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::div(ref(a), ref(b)); });
}

int tensor_mul_scalar(tensor **out, const tensor *a, double s)
{
    return produce(__func__, out, [&] { return at::mul(ref(a), at::Scalar(s)); });
}

int tensor_div_scalar(tensor **out, const tensor *a, double s)
{
    return produce(__func__, out, [&] { return at::div(ref(a), at::Scalar(s)); });
}

int tensor_div_scalar_(tensor *a, double s)
{
    return guarded(__func__, [&] {
        if (!a)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        a->t.div_(at::Scalar(s));
        return (int)ST_OK;
    });
}

int tensor_is_exclusive(const tensor *t)
{
    if (!t || !t->t.defined() || !t->t.has_storage())
        return 0;
    return t->t.use_count() == 1 && t->t.storage().use_count() == 1 && t->t.is_non_overlapping_and_dense();
}

int tensor_add_(tensor *a, const tensor *b, double alpha)
{
    return guarded(__func__, [&] {
        if (!a)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        a->t.add_(ref(b), alpha);
        return (int)ST_OK;
    });
}

int tensor_copy_(tensor *dst, const tensor *src)
{
    return guarded(__func__, [&] {
        if (!dst)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        dst->t.copy_(ref(src));
        return (int)ST_OK;
    });
}

int tensor_fill_(tensor *t, double value)
{
    return guarded(__func__, [&] {
        if (!t)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        t->t.fill_(value);
        return (int)ST_OK;
    });
}

int tensor_flip_last_bit_(tensor *t)
{
    return guarded(__func__, [&] {
        if (!t)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        at::Tensor &x = t->t;
        at::ScalarType bits;
        switch (x.scalar_type()) {
        case at::kFloat: bits = at::kInt; break;
        case at::kBFloat16:
        case at::kHalf: bits = at::kShort; break;
        default: throw shim_error(ST_INTERNAL, "not a float32, bfloat16 or float16 tensor");
        }
        /* ne(0) is false for both zeros; isfinite for infinities and NaNs. */
        at::Tensor flip = at::isfinite(x).logical_and_(x.ne(0)).to(bits);
        x.view(bits).bitwise_xor_(flip);
        return (int)ST_OK;
    });
}

int tensor_sum_dims(tensor **out, const tensor *t, const int64_t *dims_, int ndims, int keepdim)
{
    return produce(__func__, out, [&] {
        if (ndims <= 0 || !dims_)
            throw shim_error(ST_INTERNAL, "sum over no dims (use tensor_sum_all)");
        return at::sum(ref(t), at::IntArrayRef(dims_, (size_t)ndims), keepdim != 0);
    });
}

int tensor_sum_all(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).sum(); });
}

int tensor_sum_to(tensor **out, const tensor *t, int ndim, const int64_t *shape)
{
    /* at::sum_to is what autograd uses to undo broadcasting; it may return t
     * itself when the shapes already match (the handle then shares storage). */
    return produce(__func__, out, [&] { return at::sum_to(ref(t), dims(ndim, shape)); });
}

int tensor_mean_all(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).mean(); });
}

double tensor_item(const tensor *t)
{
    return guarded_or(__func__, (double)NAN, [&] { return ref(t).item<double>(); });
}

int tensor_bitwise_equal(const tensor *a, const tensor *b)
{
    /* 0 on an error (with the message set), so `if (equal)` stays safe. */
    return guarded_or(__func__, 0, [&] {
        const at::Tensor &x = ref(a), &y = ref(b);
        if (x.scalar_type() != y.scalar_type() || !x.sizes().equals(y.sizes()))
            return 0;
        /* Bytes, not at::equal: NaN payloads and -0.0 must count. */
        at::Tensor cx = x.to(at::kCPU).contiguous(), cy = y.to(at::kCPU).contiguous();
        size_t n = cx.nbytes();
        return n == 0 || memcmp(cx.data_ptr(), cy.data_ptr(), n) == 0 ? 1 : 0;
    });
}

/* ======================================================================
 * neural-network ops
 * ==================================================================== */

int tensor_linear(tensor **out, const tensor *x, const tensor *w, const tensor *b)
{
    return produce(__func__, out, [&] { return at::linear(ref(x), ref(w), opt(b)); });
}

int tensor_matmul(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::matmul(ref(a), ref(b)); });
}

static const char *gelu_mode(int tanh_approx) { return tanh_approx ? "tanh" : "none"; }

int tensor_gelu(tensor **out, const tensor *x, int tanh_approx)
{
    return produce(__func__, out, [&] { return at::gelu(ref(x), gelu_mode(tanh_approx)); });
}

int tensor_gelu_backward(tensor **out, const tensor *grad, const tensor *x, int tanh_approx)
{
    return produce(__func__, out,
                   [&] { return at::gelu_backward(ref(grad), ref(x), gelu_mode(tanh_approx)); });
}

int tensor_bernoulli(tensor **out, const tensor *like, double p_keep)
{
    /* Exactly the draw of ATen's CPU dropout. at::dropout on CPU (F.dropout in
     * training mode) is _dropout_impl in aten/src/ATen/native/Dropout.cpp, the
     * same in 1.13 and 2.x:
     *     noise = at::empty_like(input, LEGACY_CONTIGUOUS_MEMORY_FORMAT);
     *     noise.bernoulli_(1 - p);  noise.div_(1 - p);  return input * noise;
     * So a dropout built as x * (mask / p_keep) -- divide the mask first, in
     * x's dtype -- is bitwise equal to F.dropout from the same generator
     * state. Not on CUDA: there F.dropout takes the fused native_dropout
     * kernel (a bool mask, a different draw). Note torch draws nothing when
     * p == 0 or p == 1 (and for an empty input); callers must skip the draw
     * in those cases too to keep the stream in step. */
    return produce(__func__, out, [&] {
        return at::empty_like(ref(like), at::MemoryFormat::Contiguous).bernoulli_(p_keep);
    });
}

int tensor_layer_norm(tensor **out, tensor **mean, tensor **rstd, const tensor *x,
                      const tensor *w, const tensor *b, double eps)
{
    null_outs({out, mean, rstd});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &xt = ref(x);
        std::array<int64_t, 1> normalized{xt.size(-1)};
        auto r = at::native_layer_norm(xt, normalized, opt(w), opt(b), eps);
        return give_all({{out, std::get<0>(r)}, {mean, std::get<1>(r)}, {rstd, std::get<2>(r)}});
    });
}

int tensor_layer_norm_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad,
                               const tensor *x, const tensor *mean, const tensor *rstd,
                               const tensor *w, const tensor *b)
{
    null_outs({dx, dw, db});
    return guarded(__func__, [&] {
        const at::Tensor &xt = ref(x);
        std::array<int64_t, 1> normalized{xt.size(-1)};
        std::array<bool, 3> mask{dx != nullptr, dw != nullptr && w != nullptr,
                                 db != nullptr && b != nullptr};
        auto r = at::native_layer_norm_backward(ref(grad), xt, normalized, ref(mean), ref(rstd),
                                                opt(w), opt(b), mask);
        return give_all({{dx, std::get<0>(r)}, {dw, std::get<1>(r)}, {db, std::get<2>(r)}});
    });
}

int tensor_softmax(tensor **out, const tensor *x, int dim)
{
    return produce(__func__, out, [&] { return at::_softmax(ref(x), dim, false); });
}

int tensor_softmax_backward(tensor **out, const tensor *grad, const tensor *y, int dim,
                            enum dtype input_dtype)
{
    return produce(__func__, out, [&] {
        return at::_softmax_backward_data(ref(grad), ref(y), dim, to_scalar_type(input_dtype));
    });
}

int tensor_causal_fill(tensor **out, const tensor *scores, double value)
{
    return produce(__func__, out, [&] {
        const at::Tensor &s = ref(scores);
        return s.masked_fill(causal_mask(s), value);
    });
}

int tensor_causal_zero(tensor **out, const tensor *grad)
{
    return produce(__func__, out, [&] {
        const at::Tensor &g = ref(grad);
        return g.masked_fill(causal_mask(g), 0.0);
    });
}

int tensor_mse_loss(tensor **out, const tensor *x, const tensor *target)
{
    return produce(__func__, out,
                   [&] { return at::mse_loss(ref(x), ref(target), at::Reduction::Mean); });
}

int tensor_mse_loss_backward(tensor **out, const tensor *grad, const tensor *x,
                             const tensor *target)
{
    return produce(__func__, out, [&] {
        return at::mse_loss_backward(ref(grad), ref(x), ref(target), at::Reduction::Mean);
    });
}

/* F.cross_entropy with class-index targets is nll_loss(log_softmax(x, 1), t)
 * on [N, C]; its backward is nll_loss_backward then _log_softmax_backward_data,
 * the kernels below. ignore_index is torch's default, -100. */
static const int64_t k_ignore_index = -100;

int tensor_cross_entropy(tensor **loss, tensor **logp, const tensor *logits, const tensor *target)
{
    null_outs({loss, logp});
    return guarded(__func__, [&] {
        if (!loss)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &x = ref(logits);
        at::Tensor lp = at::log_softmax(rows(x), 1);
        at::Tensor l = at::nll_loss(lp, ref(target).reshape({-1}), {}, at::Reduction::Mean,
                                    k_ignore_index);
        return give_all({{loss, l}, {logp, lp.view(x.sizes())}});
    });
}

int tensor_cross_entropy_backward(tensor **out, const tensor *grad, const tensor *logp,
                                  const tensor *target)
{
    return produce(__func__, out, [&] {
        const at::Tensor &lp_in = ref(logp);
        at::Tensor lp = rows(lp_in);
        at::Tensor t = ref(target).reshape({-1});
        /* total_weight is what nll_loss's forward saved for autograd (the
         * count of non-ignored targets, in the logits' dtype); recomputing it
         * with the forward kernel gives the very same value. */
        at::Tensor total_weight =
            std::get<1>(at::nll_loss_forward(lp, t, {}, at::Reduction::Mean, k_ignore_index));
        at::Tensor dlp = at::nll_loss_backward(ref(grad), lp, t, {}, at::Reduction::Mean,
                                               k_ignore_index, total_weight);
        return at::_log_softmax_backward_data(dlp, lp, 1, lp.scalar_type()).view(lp_in.sizes());
    });
}

int tensor_rrelu(tensor **out, tensor **noise, const tensor *x, double lower, double upper)
{
    null_outs({out, noise});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &xt = ref(x);
        /* As at::rrelu (F.rrelu) does: a fresh contiguous noise buffer that
         * the kernel fills with the slopes it drew (1 where x > 0). */
        at::Tensor n = at::empty_like(xt, at::MemoryFormat::Contiguous);
        at::Tensor y = at::rrelu_with_noise(xt, n, lower, upper, true, c10::nullopt);
        return give_all({{out, y}, {noise, n}});
    });
}

int tensor_rrelu_backward(tensor **out, const tensor *grad, const tensor *x, const tensor *noise,
                          double lower, double upper)
{
    return produce(__func__, out, [&] {
        return at::rrelu_with_noise_backward(ref(grad), ref(x), ref(noise), lower, upper, true,
                                             false);
    });
}

int tensor_batch_norm_train(tensor **out, tensor **save_mean, tensor **save_invstd, const tensor *x,
                            const tensor *w, const tensor *b, tensor *running_mean, tensor *running_var,
                            double momentum, double eps)
{
    null_outs({out, save_mean, save_invstd});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        c10::optional<at::Tensor> rm, rv;
        if (running_mean)
            rm = running_mean->t;
        if (running_var)
            rv = running_var->t;
        auto r = at::native_batch_norm(ref(x), opt(w), opt(b), rm, rv, true, momentum, eps);
        return give_all({{out, std::get<0>(r)}, {save_mean, std::get<1>(r)}, {save_invstd, std::get<2>(r)}});
    });
}

int tensor_batch_norm_train_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad, const tensor *x,
                                     const tensor *w, const tensor *save_mean, const tensor *save_invstd,
                                     double eps)
{
    null_outs({dx, dw, db});
    return guarded(__func__, [&] {
        std::array<bool, 3> mask{dx != nullptr, dw != nullptr && w != nullptr, db != nullptr};
        auto r = at::native_batch_norm_backward(ref(grad), ref(x), opt(w), c10::nullopt, c10::nullopt,
                                                opt(save_mean), opt(save_invstd), true, eps, mask);
        return give_all({{dx, std::get<0>(r)}, {dw, std::get<1>(r)}, {db, std::get<2>(r)}});
    });
}

int tensor_fake_quantize(tensor **out, const tensor *x, const tensor *scale, double fp_max)
{
    return produce(__func__, out, [&] {
        const at::Tensor &xt = ref(x), &s = ref(scale);
        at::Tensor q = (xt.to(at::kFloat) * s).clamp(-fp_max, fp_max).to(at::kBFloat16).to(at::kFloat);
        return (q / s).to(xt.scalar_type());
    });
}

int tensor_delayed_scaling_update_(tensor *history, tensor *scale, const tensor *x, double fp_max)
{
    return guarded(__func__, [&] {
        if (!history || !scale)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        at::Tensor &h = history->t, &s = scale->t;
        at::Tensor amax = ref(x).abs().max().to(at::kFloat).reshape({1});
        at::Tensor shifted = at::cat({amax, h.narrow(0, 0, h.size(0) - 1)});
        h.copy_(shifted);
        at::Tensor m = h.max();
        /* a true division (Python's 448.0 / m would multiply by a reciprocal) */
        s.copy_(at::where(m > 0, at::full_like(m, fp_max).div(m), s));
        return (int)ST_OK;
    });
}
