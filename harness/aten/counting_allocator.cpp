/* counting_allocator: a c10 CPU allocator that counts live and peak bytes
 * exactly, so the harness can say how much memory checkpointing saved.
 *
 * Promises:
 *  - every byte ATen asks for on the CPU (the storage's nbytes) is counted on
 *    allocation and uncounted on free; malloc's own overhead and alignment
 *    padding are not (alloc_cpu asks posix_memalign for exactly nbytes);
 *  - memory comes from c10::alloc_cpu and goes back through c10::free_cpu, the
 *    same calls c10's DefaultCPUAllocator makes, so kernels see the same
 *    64-byte-aligned buffers as without it;
 *  - the DataPtr's context IS its data pointer, so raw_allocate/raw_deallocate
 *    and 2.x's is_simple_data_ptr keep working (a size header in front of the
 *    buffer would break both; sizes live in a map instead);
 *  - an allocation failure throws c10::OutOfMemoryError naming the bytes;
 *  - so does an allocation that would take the live bytes past the memory
 *    limit (memory_limit.h), before any memory is asked for.
 *
 * The state is process-global by necessity: c10 has one CPU allocator slot per
 * process and the deleter is a plain function pointer with no closure, so the
 * counters and the size map cannot belong to an object the caller owns. It is
 * deliberately never destroyed because tensors held by static objects
 * are freed after main returns, when a destroyed map would be a use-after-free.
 *
 * Plain C entry points (declared in counting_allocator.h) let the C harness and a Python
 * process (ctypes) install it and read it; install before the first tensor so
 * every live tensor was counted. */
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>

#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "counting_allocator.h"
#include "memory_limit.h"

namespace {

struct counters {
    std::atomic<int64_t> live{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> count{0};
    std::mutex mu;                              /* guards sizes and next_serial */
    /* data pointer -> bytes asked for, and the allocation's serial number */
    std::unordered_map<void *, std::pair<size_t, uint64_t>> sizes;
    uint64_t next_serial = 1;                   /* 0 means "not a live allocation" */
    std::atomic<bool> installed{false};
};

/* Built in static storage and never destroyed (see the file comment). No heap
 * allocation either, so the C entry points below cannot throw: nothing in
 * them allocates, and an exception must never reach their C callers. */
counters &state()
{
    alignas(counters) static unsigned char storage[sizeof(counters)];
    static counters *s = new (storage) counters;
    return *s;
}

void raise_peak(counters &s, int64_t now)
{
    int64_t seen = s.peak.load(std::memory_order_relaxed);
    while (now > seen && !s.peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
}

void counting_delete(void *ptr)
{
    if (!ptr)
        return;
    counters &s = state();
    size_t n = 0;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.sizes.find(ptr);
        if (it != s.sizes.end()) {
            n = it->second.first;
            s.sizes.erase(it);
        }
    }
    s.live.fetch_sub((int64_t)n, std::memory_order_relaxed);
    c10::free_cpu(ptr);
}

/* The most CPU bytes tensors may hold at once (memory_limit.h). Refusing
 * an allocation past it turns what would get the whole process OOM-killed,
 * taking the rest of the suite with it, into the ERROR verdict of one case.
 * Read once: a function-local constant, not state. */
const struct memory_limit &limit_now()
{
    static const struct memory_limit info = memory_limit_read();
    return info;
}

/* Allocations this large are also checked against what the system can
 * still give (MemAvailable): host copies of tensors and other processes use
 * memory our live count does not see. Smaller ones are not worth a read of
 * /proc, and cannot be what gets a process killed. */
constexpr size_t k_check_available_from = size_t(64) << 20;

/* MemAvailable in bytes, -1 when unknown. Not the cgroup's headroom: its
 * usage includes page cache the kernel would reclaim first, so it would
 * refuse allocations that fit; the cgroup's limit is in memory_limit.h. */
int64_t available_now()
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb >= 0 && kb <= INT64_MAX / 1024 ? (int64_t)kb * 1024 : -1;
}

/* Whether n more bytes must be refused, and why (into buf). Checked before
 * asking, so a refusal costs nothing; two threads racing past it can
 * overshoot by one allocation, which is fine for a guard against cases that
 * could never fit. */
bool refuse(size_t n, int64_t live, char *buf, size_t len)
{
    const struct memory_limit &limit = limit_now();
    if (limit.bytes > 0 && (n > (uint64_t)limit.bytes || live > limit.bytes - (int64_t)n)) {
        snprintf(buf, len, "tried to allocate %zu bytes (%lld bytes live; limit %lld bytes, %s)", n,
                 (long long)live, (long long)limit.bytes, limit.source);
        return true;
    }
    if (n >= k_check_available_from) {
        int64_t avail = available_now();
        if (avail >= 0 && n > (uint64_t)avail) {
            snprintf(buf, len, "tried to allocate %zu bytes (%lld bytes live; %lld bytes available)", n,
                     (long long)live, (long long)avail);
            return true;
        }
    }
    return false;
}

c10::DataPtr counted_allocate(size_t n)
{
    counters &s = state();
    char why[256];
    if (refuse(n, s.live.load(std::memory_order_relaxed), why, sizeof why))
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: ", why);
    void *ptr = nullptr;
    try {
        ptr = c10::alloc_cpu(n); /* nullptr for n == 0, as the default allocator */
    } catch (const c10::Error &) {
        /* alloc_cpu reports failure as a plain c10::Error; make it an OOM the
         * shim's guard recognises, with the size in the first line. */
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n,
                         " bytes (", s.live.load(), " bytes live)");
    }
    if (ptr) {
        try {
            std::lock_guard<std::mutex> lock(s.mu);
            s.sizes.emplace(ptr, std::make_pair(n, s.next_serial++));
        } catch (...) {
            c10::free_cpu(ptr);
            throw;
        }
        int64_t now = s.live.fetch_add((int64_t)n, std::memory_order_relaxed) + (int64_t)n;
        raise_peak(s, now);
        s.count.fetch_add(1, std::memory_order_relaxed);
    }
    return c10::DataPtr(ptr, ptr, &counting_delete, c10::Device(c10::DeviceType::CPU));
}

/* c10::Allocator differs between the libtorch versions we build against:
 * 1.13 has `DataPtr allocate(size_t) const = 0`; 2.3 made allocate
 * non-const and added a pure `copy_data(void*, const void*, size_t) const`.
 * (Any cut-off between 1.13 and 2.11 is right for the two we target.) */
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define CKPT_ALLOCATE_CONST
#define CKPT_ALLOCATOR_HAS_COPY_DATA 1
#else
#define CKPT_ALLOCATE_CONST const
#define CKPT_ALLOCATOR_HAS_COPY_DATA 0
#endif

struct counting_allocator final : c10::Allocator {
    c10::DataPtr allocate(size_t n) CKPT_ALLOCATE_CONST override { return counted_allocate(n); }
    c10::DeleterFnPtr raw_deleter() const override { return &counting_delete; }
#if CKPT_ALLOCATOR_HAS_COPY_DATA
    void copy_data(void *dest, const void *src, std::size_t count) const override
    {
        default_copy_data(dest, src, count);
    }
#endif
};

counting_allocator g_allocator; /* stateless: the counters live in state() */

/* Above any priority c10 or a backend registers (they use 0), so nothing
 * replaces it silently; only another 255 could. */
constexpr uint8_t k_priority = 255;

} // namespace

/* Training steps free their activations in backward and ask for the same
 * sizes again in the next step's forward. glibc, by default, hands the top
 * of its heap back to the kernel once it exceeds twice the largest buffer
 * freed so far (and maps large buffers one by one), so every forward faulted
 * its activations in afresh: thousands of page faults per step, 5-10% of a
 * matmul-bound CPU step, and more or less of them depending on the process's
 * history (a Python process that imported torch keeps its heap pinned and
 * barely faults). Buffers below 32 MiB come from the heap and up to 256 MiB
 * of free heap stays mapped, so both processes that install this allocator
 * (the harness and bench_vs_torch's torch side) reuse their memory alike.
 * The counted bytes are what tensors ask for and do not change. */
static void keep_freed_buffers_mapped()
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

extern "C" int ckpt_install_counting_allocator(void)
{
    counters &s = state();
    bool expected = false;
    if (s.installed.compare_exchange_strong(expected, true)) {
        keep_freed_buffers_mapped();
        c10::SetCPUAllocator(&g_allocator, k_priority);
    }
    return 0;
}

extern "C" int64_t ckpt_counting_allocator_limit(void) { return limit_now().bytes; }

extern "C" const char *ckpt_counting_allocator_limit_source(void) { return limit_now().source; }

extern "C" int ckpt_memory_refuses(uint64_t bytes, char *why, size_t len)
{
    char buf[256];
    bool no = refuse((size_t)bytes, state().live.load(), buf, sizeof buf);
    if (no && why && len)
        snprintf(why, len, "%s", buf);
    return no;
}

extern "C" uint64_t ckpt_counting_allocator_serial(const void *ptr)
{
    counters &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.sizes.find(const_cast<void *>(ptr));
    return it == s.sizes.end() ? 0 : it->second.second;
}

extern "C" int ckpt_counting_allocator_installed(void)
{
    return state().installed.load() && c10::GetCPUAllocator() == &g_allocator;
}

extern "C" void ckpt_counting_allocator_stats(int64_t *live, int64_t *peak, int64_t *count)
{
    counters &s = state();
    if (live)
        *live = s.live.load();
    if (peak)
        *peak = s.peak.load();
    if (count)
        *count = s.count.load();
}

extern "C" void ckpt_counting_allocator_reset_peak(void)
{
    counters &s = state();
    s.peak.store(s.live.load());
}
