/* memory_limit: the most bytes this process may hold at once, and what sets
 * it: physical memory, the cgroup's limit, RLIMIT_AS, or CKPT_MEMORY_LIMIT
 * when that is lower. Torch-free: the counting allocator refuses past it,
 * and the judge bounds what a read may load by it. */
#ifndef CKPT_MEMORY_LIMIT_H
#define CKPT_MEMORY_LIMIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct memory_limit {
    int64_t bytes;      /* > 0; -1 when CKPT_MEMORY_LIMIT is malformed */
    const char *source; /* a static phrase, for messages ("cgroup memory limit") */
};

/* Reads the limit now (the environment, /proc and /sys; no state kept). */
struct memory_limit memory_limit_read(void);
/* "1048576", "512M", "8G" (powers of 1024) as bytes; -1 if it is not one. */
int64_t memory_limit_parse_bytes(const char *text);

#ifdef __cplusplus
}
#endif

#endif
