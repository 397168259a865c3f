/* memory_limit: see memory_limit.h. */
#define _POSIX_C_SOURCE 200809L

#include "memory_limit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int64_t memory_limit_parse_bytes(const char *text)
{
    if (!text || !(*text >= '0' && *text <= '9'))
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (errno || *end || v == 0 || v > (unsigned long long)(INT64_MAX >> shift))
        return -1;
    return (int64_t)(v << shift);
}

/* The cgroup (v2, else v1) memory limit of this process, 0 when none: in a
 * container it is what the OOM killer enforces, often far below the host's
 * RAM that sysconf reports. */
static int64_t cgroup_limit(void)
{
    char path[512] = "/sys/fs/cgroup/memory.max", line[512];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", strcmp(line + 3, "/") == 0 ? "" : line + 3);
            }
        fclose(f);
    }
    const char *candidates[] = {path, "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        FILE *g = fopen(candidates[i], "r");
        if (!g)
            continue;
        char value[64] = "";
        int got = fgets(value, sizeof value, g) != NULL;
        fclose(g);
        value[strcspn(value, "\n")] = '\0';
        int64_t bytes = got ? memory_limit_parse_bytes(value) : -1; /* "max" = no limit */
        if (bytes > 0)
            return bytes;
    }
    return 0;
}

/* Past physical memory (or the cgroup's limit) the kernel's overcommit
 * would still grant an allocation, and touching its pages would get the
 * whole process OOM-killed; CKPT_MEMORY_LIMIT lowers the limit (parallel
 * jobs sharing a machine, tests). */
struct memory_limit memory_limit_read(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    struct memory_limit l = {INT64_MAX, "no limit known"};
    if (pages > 0 && page > 0 && pages <= INT64_MAX / page)
        l = (struct memory_limit){(int64_t)pages * page, "physical memory"};
    int64_t group = cgroup_limit();
    if (group > 0 && group < l.bytes)
        l = (struct memory_limit){group, "cgroup memory limit"};
    /* Past the address space limit (ulimit -v) an allocation fails
     * whatever memory is free. */
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < (rlim_t)l.bytes)
        l = (struct memory_limit){(int64_t)as.rlim_cur, "RLIMIT_AS, ulimit -v"};
    const char *env = getenv("CKPT_MEMORY_LIMIT");
    if (env) {
        int64_t asked = memory_limit_parse_bytes(env);
        if (asked < 0)
            l = (struct memory_limit){-1, "CKPT_MEMORY_LIMIT is malformed"};
        else if (asked < l.bytes)
            l = (struct memory_limit){asked, "CKPT_MEMORY_LIMIT"};
    }
    return l;
}
