#define _DEFAULT_SOURCE /* mkstemps */

#include "temp_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* Where the output is (a missing or read-only directory, a path through a
 * file) is the user's to fix; anything else (disk full) is not. */
static int errno_status(int e)
{
    switch (e) {
    case EACCES: case EPERM: case ENOENT: case ENOTDIR: case EROFS:
    case EISDIR: case ENAMETOOLONG: case ELOOP:
        return ST_INPUT;
    default:
        return ST_INTERNAL;
    }
}

int temp_file_create(const char *path, char **tmp, int *fd)
{
    *tmp = NULL;
    *fd = -1;
    size_t n = strlen(path);
    char *name = malloc(n + sizeof ".XXXXXX.tmp");
    if (!name)
        return error_set(ST_INTERNAL, "%s: out of memory", path);
    snprintf(name, n + sizeof ".XXXXXX.tmp", "%s.XXXXXX.tmp", path);
    int f = mkstemps(name, 4);
    if (f < 0) {
        int e = errno;
        int rc = error_set(errno_status(e), "%s: cannot create %s: %s", path, name, strerror(e));
        free(name);
        return rc;
    }
    /* mkstemps makes it 0600; a report is as readable as any new file. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(f, 0666 & ~mask);
    *tmp = name;
    *fd = f;
    return ST_OK;
}

int temp_file_finish(int fd, const char *tmp, const void *data, size_t len)
{
    const char *p = data;
    int e = 0;
    while (len > 0) {
        ssize_t wrote = write(fd, p, len);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            e = wrote < 0 ? errno : ENOSPC;
            break;
        }
        p += wrote;
        len -= (size_t)wrote;
    }
    if (close(fd) != 0 && !e)
        e = errno;
    if (e) {
        unlink(tmp);
        return error_set(ST_INTERNAL, "%s: cannot write: %s", tmp, strerror(e));
    }
    return ST_OK;
}

int temp_file_publish(const char *tmp, const char *path)
{
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return error_set(errno_status(e), "%s: cannot rename %s to it: %s", path, tmp, strerror(e));
    }
    return ST_OK;
}
