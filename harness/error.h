/* error: the one error slot every module writes and the CLI prints.
 * Functions return a status (0 = ok, see enum status); on failure they put a
 * one-line message here. The slot is thread-local, like errno, so helper
 * threads (the atomic kernel) cannot clobber the caller's message. */
#ifndef CKPT_ERROR_H
#define CKPT_ERROR_H

enum status {
    ST_OK = 0,
    ST_INPUT = 2,     /* bad user input: case file, HDF5 file, flag (exit 2) */
    ST_INTERNAL = 3,  /* a bug or a library failure (exit 3) */
    ST_RUN = 4,       /* a run failed: out of memory, checkpoint error (ERROR verdict) */
    ST_MISMATCH = 5,  /* a checkpoint's own check found recomputed != forward (FAIL) */
    ST_STOP = 6       /* not an error: non-reentrant recompute reached its last handle */
};

/* Sets the message (printf-style) and returns `code`, so callers write
 * `return error_set(ST_INPUT, "%s:%d: unknown key", file, line);`. */
int error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with context: "ctx: old message". */
int error_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *error_message(void);
void error_clear(void);

#endif
