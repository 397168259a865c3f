/* aten_devices.cpp: the process- and device-level half of aten.h's C API:
 * set-up (threads, the libtorch version guard), devices and their names,
 * memory statistics, the default generators' RNG state, CUDA streams and
 * Philox reservations for the harness's own kernels, and timers.
 *
 * Every entry point runs its body through shim::guarded (shim.hpp), so no
 * C++ exception reaches C. CUDA-only code sits behind CKPT_WITH_CUDA (set by
 * the build when libtorch has CUDA; cmake/cuda.cmake's "check" mode compiles
 * that branch without a GPU). */
#include "shim.hpp"
#include "torch_runtime.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <torch/version.h>

#ifdef CKPT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

using shim::guarded;
using shim::guarded_or;
using shim::shim_error;
using shim::to_device;

namespace {

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

int64_t aten_parallel_grain(void) { return at::internal::GRAIN_SIZE; }

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
