#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thread-local like errno: see error.h. */
static _Thread_local char error_slot[2048];

/* Messages quote what users and files wrote (a key, a line, an HDF5
 * name); a control character in there (a stray CR, an escape sequence)
 * would break the one-line promise or the terminal, so each becomes '?'. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_slot, sizeof error_slot, fmt, ap);
    va_end(ap);
    one_line(error_slot);
    return code;
}

int error_wrap(int code, const char *fmt, ...)
{
    char prefix[512];
    char old[sizeof error_slot];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_slot, sizeof old);
    int n = snprintf(error_slot, sizeof error_slot, "%s: ", prefix);
    if (n >= 0 && (size_t)n < sizeof error_slot)
        snprintf(error_slot + n, sizeof error_slot - (size_t)n, "%s", old);
    one_line(error_slot);
    return code;
}

const char *error_message(void) { return error_slot[0] ? error_slot : "unknown error"; }

void error_clear(void) { error_slot[0] = '\0'; }
