/* common: what several subcommands use, judge side and training side
 * alike (torch-free): the error exit, the option error, the output
 * directory's checks and creation, the read budget. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case.h"
#include "case_text.h"
#include "cli.h"
#include "error.h"
#include "h5store.h"
#include "memory_limit.h"

const char *cli_scripts_dir(char *buf, size_t len)
{
    const char *env = getenv("CKPT_SCRIPTS_DIR");
    if (env && env[0])
        return env;
#ifdef CKPT_SCRIPTS_BESIDE_BINARY
    /* An installed binary finds its scripts relative to itself, wherever
     * the venv was put. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(buf, len, "%s/%s", self, CKPT_SCRIPTS_BESIDE_BINARY);
        return buf;
    }
    (void)buf, (void)len;
    return CKPT_SCRIPTS_BESIDE_BINARY;
#else
    (void)buf, (void)len;
    return CKPT_SOURCE_DIR "/scripts";
#endif
}

int cli_fail(int code)
{
    fprintf(stderr, "ckpt-verify: %s\n", error_message());
    return code == ST_INPUT ? EXIT_USAGE : code == ST_OK ? 0 : EXIT_INTERNAL;
}

#define OPTION_NAMES_MAX 64
#define OPTION_NAME_MAX 40

static const char *option_name_at(const void *ctx, int i)
{
    return ((const char(*)[OPTION_NAME_MAX])ctx)[i];
}

void cli_option_hint(char *buf, size_t len, const char *arg, const struct option *options, const char *otherwise)
{
    char names[OPTION_NAMES_MAX][OPTION_NAME_MAX], typed[OPTION_NAME_MAX];
    const char *near[3];
    int count = 0, n = 0;
    for (; options && count < OPTION_NAMES_MAX && options[count].name; count++)
        snprintf(names[count], sizeof names[count], "--%s", options[count].name);
    if (strncmp(arg, "--", 2) == 0 && arg[2]) { /* a short option has no near miss worth naming */
        snprintf(typed, sizeof typed, "%.*s", (int)strcspn(arg, "="), arg);
        n = text_suggest(typed, option_name_at, names, count, near, 3);
    }
    text_format_suggestions(buf, len, near, n, otherwise);
}

int cli_option_error(const char *command, int opt, const char *arg, const struct option *options)
{
    const char *sp = command[0] ? " " : "";
    char see[96], hint[3 * OPTION_NAME_MAX + 64];
    snprintf(see, sizeof see, " (see ckpt-verify%s%s --help)", sp, command);
    if (opt == ':') {
        fprintf(stderr, "ckpt-verify%s%s: option '%s' needs a value%s\n", sp, command, arg, see);
    } else {
        cli_option_hint(hint, sizeof hint, arg, options, see);
        fprintf(stderr, "ckpt-verify%s%s: unknown option '%s'%s\n", sp, command, arg, hint);
    }
    return EXIT_USAGE;
}

static const char *const subcommands[] = {"diff", "plot", "bench", "merge", "judge", "html"};

static const char *subcommand_at(const void *ctx, int i)
{
    return ((const char *const *)ctx)[i];
}

int cli_subcommand_hint(char *buf, size_t len, const char *word)
{
    const char *near[3];
    int count = (int)(sizeof subcommands / sizeof *subcommands);
    int n = word[0] == '-' ? 0 : text_suggest(word, subcommand_at, subcommands, count, near, 3);
    text_format_suggestions(buf, len, near, n, "");
    return n;
}

/* What the runs read from files may load in all: CKPT_MEMORY_LIMIT when it
 * is set, else H5STORE_READ_LIMIT or the memory limit (physical memory,
 * the cgroup's, RLIMIT_AS), whichever is less (a small file can declare
 * huge or hard-linked datasets); the limit that applies is named. */
int cli_read_budget(struct read_budget *b)
{
    struct memory_limit limit = memory_limit_read();
    int64_t memory = limit.bytes;
    char size[32];
    if (memory < 0)
        return error_set(ST_INPUT, "CKPT_MEMORY_LIMIT='%s': not a byte count (for example 512M or 8G)",
                         getenv("CKPT_MEMORY_LIMIT"));
    if (getenv("CKPT_MEMORY_LIMIT") || (uint64_t)memory < H5STORE_READ_LIMIT) {
        b->bytes = (uint64_t)memory;
        snprintf(b->limit, sizeof b->limit, "the %s memory limit (%s)",
                 text_format_bytes((double)memory, size, sizeof size), limit.source);
    } else {
        b->bytes = H5STORE_READ_LIMIT;
        snprintf(b->limit, sizeof b->limit, "the %s a read may load (the default; CKPT_MEMORY_LIMIT sets another)",
                 text_format_bytes((double)H5STORE_READ_LIMIT, size, sizeof size));
    }
    return ST_OK;
}

int cli_check_held(const struct read_budget *b, const char *what, uint64_t largest, int held)
{
    char size[32], total[32];
    uint64_t need = largest > UINT64_MAX / (uint64_t)held ? UINT64_MAX : largest * (uint64_t)held;
    if (need <= b->bytes)
        return ST_OK;
    return error_set(ST_INPUT, "%s: the largest dataset claims %s and %d are held at once (%s), more than %s; "
                     "nothing loaded", what, text_format_bytes((double)largest, size, sizeof size), held,
                     text_format_bytes((double)need, total, sizeof total), b->limit);
}

int cli_check_claim(const struct read_budget *b, const char *what, uint64_t claimed)
{
    char size[32];
    if (claimed <= b->bytes)
        return ST_OK;
    return error_set(ST_INPUT, "%s: the datasets claim %s (a dataset linked under several names counts once per "
                     "name), more than %s; nothing loaded", what, text_format_bytes((double)claimed, size, sizeof size),
                     b->limit);
}

/* The longest --out accepted: a report's path, "<out>/<case>.h5", must fit
 * the 1024 bytes a case result keeps (judge.h), with the longest case name. */
#define OUT_DIR_MAX (1024 - CASE_NAME_MAX - 8)

/* An output directory is refused before any work when it cannot be one:
 * too long to keep whole, or an existing non-directory. */
int cli_check_out_dir(const char *path)
{
    struct stat sb;
    if (!path[0])
        return error_set(ST_INPUT, "--out: empty path");
    if (strlen(path) > OUT_DIR_MAX)
        return error_set(ST_INPUT, "--out: path is %zu bytes long, more than the %d accepted", strlen(path),
                         OUT_DIR_MAX);
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return error_set(ST_INPUT, "%s: exists and is not a directory", path);
    return ST_OK;
}

int cli_make_dirs(const char *path)
{
    char buf[1024];
    int st = cli_check_out_dir(path);
    if (st)
        return st;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return error_set(ST_INPUT, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return error_set(ST_INPUT, "%s: cannot create directory: %s", buf, strerror(errno));
    if (access(buf, W_OK) != 0)
        return error_set(ST_INPUT, "%s: output directory is not writable", buf);
    return ST_OK;
}

void cli_keep_freed_memory(void)
{
    /* glibc's largest heap (not mmap) allocation, and no trimming: a
     * judge holds at most a few tensors at once, so what stays mapped is
     * bounded by them, and reusing it saves the page faults and zeroing
     * that were a third of judging time. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
}
