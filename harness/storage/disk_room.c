/* disk_room: see disk_room.h. Linux fallocate(FALLOC_FL_KEEP_SIZE) where the
 * filesystem has it; elsewhere the free space statvfs reports stands in. */
#define _GNU_SOURCE

#include "disk_room.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "error.h"

void disk_room_init(struct disk_room *r, int fd, const char *name)
{
    r->fd = fd;
    r->name = name;
    r->reserved = 0;
    r->size_limit = UINT64_MAX;
    struct rlimit lim;
    if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
        r->size_limit = (uint64_t)lim.rlim_cur;
}

static int room_error(const struct disk_room *r, int e, uint64_t need)
{
    return error_set(ST_INTERNAL, "%s: cannot write: %s (room for %llu bytes is reserved before each write, "
                     "HDF5's metadata included; nothing written)", r->name, strerror(e), (unsigned long long)need);
}

int disk_room_ensure(struct disk_room *r, uint64_t end)
{
    uint64_t need = end + DISK_ROOM_MARGIN_BYTES + end / DISK_ROOM_MARGIN_SHARE;
    if (need > r->size_limit)
        return room_error(r, EFBIG, need);
    if (need <= r->reserved)
        return ST_OK;
    uint64_t target = need + need / 8;
    if (target > r->size_limit)
        target = r->size_limit;
    int rc = fallocate(r->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)target);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
        /* No reservation here: the free space must at least hold it now. */
        struct statvfs vfs;
        struct stat st;
        if (fstatvfs(r->fd, &vfs) == 0 && fstat(r->fd, &st) == 0) {
            uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
            uint64_t have = (uint64_t)st.st_size + free_bytes;
            if (have < need)
                return room_error(r, ENOSPC, need);
        }
        r->reserved = target;
        return ST_OK;
    }
    if (rc != 0)
        return room_error(r, errno, need);
    r->reserved = target;
    return ST_OK;
}

void disk_room_release(struct disk_room *r)
{
    struct stat st;
    if (r->reserved == 0 || fstat(r->fd, &st) != 0 || (uint64_t)st.st_size >= r->reserved)
        return;
    /* Punching past the end frees what KEEP_SIZE reserved; a filesystem
     * without it keeps the blocks until the file is removed. */
    (void)fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                    (off_t)(r->reserved - (uint64_t)st.st_size));
    r->reserved = 0;
}
