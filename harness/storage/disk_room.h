/* disk_room: room on disk reserved for a file before HDF5 writes into it.
 * HDF5 cannot recover from a write that fails on disk (after a failed flush
 * in H5Fclose the file stays half-closed and its cleanup at exit crashes),
 * so h5store asks here before every write: the blocks up to the file's end
 * plus the write plus a margin for metadata are reserved ahead (fallocate
 * without changing the size), and a file size limit (ulimit -f) is checked.
 * A failure is a clean error while nothing has been handed to HDF5. */
#ifndef CKPT_DISK_ROOM_H
#define CKPT_DISK_ROOM_H

#include <stdint.h>

struct disk_room {
    int fd;              /* the file, open for writing */
    const char *name;    /* for messages */
    uint64_t reserved;   /* bytes from offset 0 known to have blocks */
    uint64_t size_limit; /* RLIMIT_FSIZE (soft), UINT64_MAX when none */
};

/* Metadata HDF5 may still write after the last data (object headers,
 * B-trees, heaps at flush), kept free beyond every reservation: a fixed
 * part and a part proportional to the file. */
#define DISK_ROOM_MARGIN_BYTES (256u << 10)
#define DISK_ROOM_MARGIN_SHARE 64 /* 1/64 of the file */

void disk_room_init(struct disk_room *r, int fd, const char *name);
/* Makes sure the file can grow to `end` bytes plus the margin: ST_INTERNAL
 * with errno's words ("File too large", "No space left on device") when it
 * cannot. Reserves in steps of at least 1/8 of the file, so a stream of
 * small writes costs few system calls. */
int disk_room_ensure(struct disk_room *r, uint64_t end);
/* Gives back the blocks reserved past the file's final size. */
void disk_room_release(struct disk_room *r);

#endif
