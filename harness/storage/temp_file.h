/* temp_file: the temporary a report file is written under before it is
 * renamed into place. Each name is unique ("<path>.XXXXXX.tmp", created
 * exclusively), so two runs writing into one directory never share one,
 * and a leftover of a killed run still matches *.tmp. */
#ifndef CKPT_TEMP_FILE_H
#define CKPT_TEMP_FILE_H

#include <stddef.h>

/* Creates the temporary for `path` (mode 0666 less the umask); *tmp is
 * malloc'd, *fd open for writing. ST_INPUT with errno's reason when the
 * directory cannot hold it (missing, read-only, a file), else ST_INTERNAL. */
int temp_file_create(const char *path, char **tmp, int *fd);
/* Writes all of data to fd and closes it; on failure removes tmp and says
 * why (errno's words: "No space left on device", "File too large"). */
int temp_file_finish(int fd, const char *tmp, const void *data, size_t len);
/* Renames tmp over path; on failure removes tmp. */
int temp_file_publish(const char *tmp, const char *path);

#endif
