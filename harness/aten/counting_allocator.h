/* counting_allocator: the exact byte counts of a process's CPU tensors, as
 * plain C symbols (counting_allocator.cpp). Self-contained: this header,
 * the .cpp, memory_limit.h and memory_limit.c build against any torch's
 * c10 headers and library, with nothing else of the harness. */
#ifndef CKPT_COUNTING_ALLOCATOR_H
#define CKPT_COUNTING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The counting CPU allocator on its own, as plain C symbols with no harness
 * state, so that a Python process can install it before its first tensor:
 *     lib = ctypes.CDLL("libckpt_aten.so")
 *     lib.ckpt_install_counting_allocator()
 * (the library must link the libc10 of the torch that Python imported;
 * counting_allocator.cpp needs nothing but c10 and memory_limit.c, so it
 * is also built alone into a small library for that: against the user's
 * own torch, at first use, by python/ckpt_verify/memory.py).
 * The allocator is process-global: c10 has one CPU allocator slot per process.
 * install returns 0 and is idempotent; aten_init calls it. */
int ckpt_install_counting_allocator(void);
int ckpt_counting_allocator_installed(void);
/* Live bytes, peak bytes since the last reset, allocations since start
 * (any pointer may be NULL). */
void ckpt_counting_allocator_stats(int64_t *live, int64_t *peak, int64_t *count);
void ckpt_counting_allocator_reset_peak(void);
/* The serial number of the live allocation whose data starts at ptr (1, 2,
 * ... in the order they were made, never reused), or 0 when no live
 * allocation of this allocator starts there. (ptr, serial) names a storage
 * for as long as it lives without holding anything of it: the Python
 * memory map's identity for CPU storages (a weak reference would keep the
 * storage's small C++ object, and malloc's heap fragments around it). */
uint64_t ckpt_counting_allocator_serial(const void *ptr);
/* The most bytes tensors may hold live on the CPU: physical memory, the
 * cgroup's limit, the address space limit (RLIMIT_AS, ulimit -v) or
 * CKPT_MEMORY_LIMIT ("512M", "8G"), whichever is least; an allocation past
 * it fails as out of memory (ST_RUN) at once. -1 when CKPT_MEMORY_LIMIT is
 * malformed (aten_init then refuses to start). */
int64_t ckpt_counting_allocator_limit(void);
/* Which of those it is, in words ("physical memory", "CKPT_MEMORY_LIMIT"). */
const char *ckpt_counting_allocator_limit_source(void);
/* 1 (and why, in one line) when `bytes` more would pass that limit or, for
 * large requests, what the system has available: host copies check here
 * before allocating, so that they fail too instead of being OOM-killed. */
int ckpt_memory_refuses(uint64_t bytes, char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif
