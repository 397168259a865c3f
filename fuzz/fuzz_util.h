/* fuzz_util: what the fuzz targets share — writing the input to a temporary
 * file (the loaders under test take paths) and the invariant every failure
 * must keep: one non-empty message line. Header-only so each target is one
 * translation unit plus the harness sources it exercises. */
#ifndef CKPT_FUZZ_UTIL_H
#define CKPT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

/* Writes data to a new file under $TMPDIR (or /tmp) and puts its name in
 * path. Returns 0, or -1 when the file cannot be made (the input is then
 * skipped: that is the machine's problem, not a finding). */
static inline int fuzz_write_temp(const uint8_t *data, size_t size, char *path, size_t cap)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/ckpt-fuzz-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            unlink(path);
            return -1;
        }
        done += (size_t)n;
    }
    close(fd);
    return 0;
}

/* A failed call must leave exactly one line for the CLI to print; anything
 * else (no message, a multi-line HDF5 dump, a control character that would
 * break the line) is a bug the fuzzer reports by crashing. */
static inline void fuzz_check_message(int status)
{
    if (status == ST_OK)
        return;
    const char *m = error_message();
    int control = 0;
    for (const char *p = m; p && *p; p++)
        control |= (unsigned char)*p < 0x20 || *p == 0x7f;
    if (!m || !*m || control) {
        fprintf(stderr, "bad error message for status %d: '%s'\n", status, m ? m : "(null)");
        abort();
    }
}

#endif
