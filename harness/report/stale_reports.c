#include "stale_reports.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "summary_file.h"

#define LOCK_TIMEOUT_DEFAULT_S 300.0

int out_dir_lock(const char *out_dir, int *fd)
{
    double limit = LOCK_TIMEOUT_DEFAULT_S;
    const char *env = getenv("CKPT_LOCK_TIMEOUT");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (*end || !(v >= 0) || isinf(v))
            return error_set(ST_INPUT, "CKPT_LOCK_TIMEOUT: '%s' is not a number of seconds >= 0", env);
        limit = v;
    }
    *fd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0)
        return error_set(ST_RUN, "%s: cannot open the directory to lock it: %s", out_dir, strerror(errno));
    /* Polled, not a blocking flock: a holder that never lets go (a stopped
     * process) costs at most `limit`, never a wait for ever. */
    struct timespec start, now, nap = {0, 20 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
            return ST_OK;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) * 1e-9 >= limit) {
            errno = ETIMEDOUT;
            break;
        }
        nanosleep(&nap, NULL);
    }
    int err = errno;
    close(*fd);
    *fd = -1;
    if (err == ETIMEDOUT)
        return error_set(ST_RUN, "%s: another ckpt-verify held the directory's lock for %g s (CKPT_LOCK_TIMEOUT); "
                                 "summary.json not written", out_dir, limit);
    return error_set(ST_RUN, "%s: cannot lock the directory: %s", out_dir, strerror(err));
}

void out_dir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the only descriptor releases the flock */
}

/* A record's h5 when it names a file directly in out_dir (a bare name is
 * relative to out_dir, as a merged summary writes it): its file name in
 * key (one name in one directory, however the path is spelled), its path
 * in path. 0 for anything else: only this run directory's own reports
 * count. The file need not exist. */
static int in_out_dir(const char *out_dir, const struct stat *dir_st, const char *h5, char *key, size_t key_len,
                      char *path, size_t path_len)
{
    size_t n = strlen(h5);
    if (n < 4 || strcmp(h5 + n - 3, ".h5") != 0)
        return 0;
    const char *slash = strrchr(h5, '/');
    if (slash)
        snprintf(path, path_len, "%s", h5);
    else
        snprintf(path, path_len, "%s/%s", out_dir, h5);
    char parent[PATH_MAX];
    if (slash)
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - h5 ? slash - h5 : 1), h5);
    else
        snprintf(parent, sizeof parent, "%s", out_dir);
    struct stat parent_st;
    if (stat(parent, &parent_st) != 0 || parent_st.st_dev != dir_st->st_dev || parent_st.st_ino != dir_st->st_ino)
        return 0;
    snprintf(key, key_len, "%s", slash ? slash + 1 : h5);
    return 1;
}

/* The same, for a regular file that exists: its stat in *st. */
static int own_report(const char *out_dir, const struct stat *dir_st, const char *h5, char *key, size_t key_len,
                      char *path, size_t path_len, struct stat *st)
{
    return in_out_dir(out_dir, dir_st, h5, key, key_len, path, path_len) && stat(path, st) == 0 &&
           S_ISREG(st->st_mode);
}

/* Every own report a summary names, into set (file name -> {path, case, dev, ino}). */
static void collect(const char *out_dir, const json_t *summary, json_t *set)
{
    struct stat dir_st, st;
    char key[PATH_MAX], path[PATH_MAX * 2];
    if (stat(out_dir, &dir_st) != 0)
        return;
    const json_t *records = json_object_get(summary, "records");
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        const char *h5 = summary_str(rec, "h5");
        if (h5[0] && own_report(out_dir, &dir_st, h5, key, sizeof key, path, sizeof path, &st))
            json_object_set_new(set, key, json_pack("{s:s, s:s, s:I, s:I}", "path", path, "case",
                                                    summary_str(rec, "case"), "dev", (json_int_t)st.st_dev, "ino",
                                                    (json_int_t)st.st_ino));
    }
}

/* The summary out_dir holds now (a new reference), NULL for none or an
 * unreadable one. */
static json_t *current_summary(const char *out_dir)
{
    char path[PATH_MAX + 16];
    json_t *root = NULL;
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    if (access(path, F_OK) != 0 || summary_file_load(out_dir, &root) != ST_OK)
        root = NULL;
    error_clear(); /* an unreadable summary: as if none */
    return root;
}

/* Which summary root is: its summary_id ("" for one written before ids),
 * null for none. */
static json_t *summary_token(const json_t *root)
{
    if (!root)
        return json_null();
    const char *id = summary_str(root, "summary_id");
    return json_string(id);
}

json_t *stale_reports_before(const char *out_dir)
{
    json_t *before = json_object(), *reports = json_object(), *own = json_object();
    json_t *previous = current_summary(out_dir);
    if (!before || !reports || !own || json_object_set_new(before, "summary_id", summary_token(previous)) ||
        json_object_set(before, "reports", reports) || json_object_set(before, "own", own)) {
        json_decref(before);
        before = NULL;
    } else if (previous) {
        collect(out_dir, previous, reports);
    }
    json_decref(reports);
    json_decref(own);
    json_decref(previous);
    return before;
}

void stale_reports_own(json_t *before, const char *h5_path)
{
    struct stat st;
    const char *slash = strrchr(h5_path, '/');
    if (!before || !h5_path[0] || stat(h5_path, &st) != 0)
        return;
    json_object_set_new(json_object_get(before, "own"), slash ? slash + 1 : h5_path,
                        json_pack("{s:I, s:I}", "dev", (json_int_t)st.st_dev, "ino", (json_int_t)st.st_ino));
}

static int same_file(const json_t *known, const struct stat *st)
{
    return known && json_integer_value(json_object_get(known, "dev")) == (json_int_t)st->st_dev &&
           json_integer_value(json_object_get(known, "ino")) == (json_int_t)st->st_ino;
}

/* Cases (as a set) whose report this run wrote and a concurrent run has
 * since renamed its own over: their records are that run's now. */
static json_t *cases_taken_over(const char *out_dir, const json_t *before, const json_t *records)
{
    json_t *taken = json_object();
    struct stat dir_st, st;
    char key[PATH_MAX], path[PATH_MAX * 2];
    if (!taken || stat(out_dir, &dir_st) != 0)
        return taken;
    const json_t *own = json_object_get(before, "own");
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        const char *h5 = summary_str(rec, "h5");
        if (h5[0] && own_report(out_dir, &dir_st, h5, key, sizeof key, path, sizeof path, &st) &&
            json_object_get(own, key) && !same_file(json_object_get(own, key), &st))
            json_object_set_new(taken, summary_str(rec, "case"), json_true());
    }
    return taken;
}

static int set_new_id(json_t *summary)
{
    static unsigned counter;
    struct timespec ts;
    char id[96];
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id, sizeof id, "%lld.%09ld-%ld-%u", (long long)ts.tv_sec, ts.tv_nsec, (long)getpid(), ++counter);
    return json_object_set_new(summary, "summary_id", json_string(id));
}

int stale_reports_merge(const char *out_dir, const json_t *before, json_t *summary)
{
    json_t *records = json_object_get(summary, "records");
    json_t *current = current_summary(out_dir), *now = summary_token(current);
    int st = ST_OK;
    if (before && current && !json_equal(now, json_object_get(before, "summary_id"))) {
        /* A concurrent run wrote this summary since this run started: its
         * records stay beside this run's, except for the cases this run
         * ran again whose report on disk is still this run's. */
        json_t *taken = cases_taken_over(out_dir, before, records), *mine = json_object();
        for (size_t i = 0; mine && i < json_array_size(records); i++)
            json_object_set_new(mine, summary_str(json_array_get(records, i), "case"), json_true());
        for (size_t i = json_array_size(records); taken && i-- > 0;)
            if (json_object_get(taken, summary_str(json_array_get(records, i), "case")))
                json_array_remove(records, i);
        const json_t *theirs = json_object_get(current, "records");
        for (size_t i = 0; taken && mine && i < json_array_size(theirs); i++) {
            const json_t *rec = json_array_get(theirs, i);
            const char *c = summary_str(rec, "case");
            if ((!json_object_get(mine, c) || json_object_get(taken, c)) && json_array_append(records, (json_t *)rec))
                st = error_set(ST_INTERNAL, "%s: merging the summary: out of memory", out_dir);
        }
        if (!taken || !mine)
            st = error_set(ST_INTERNAL, "%s: merging the summary: out of memory", out_dir);
        json_decref(taken);
        json_decref(mine);
    }
    /* summary.json names only files that exist: a report removed since its
     * record was written keeps its verdict, not its file name. */
    struct stat dir_st, fst;
    char key[PATH_MAX], path[PATH_MAX * 2];
    for (size_t i = 0; stat(out_dir, &dir_st) == 0 && i < json_array_size(records); i++) {
        json_t *rec = json_array_get(records, i);
        const char *h5 = summary_str(rec, "h5");
        if (h5[0] && in_out_dir(out_dir, &dir_st, h5, key, sizeof key, path, sizeof path) && stat(path, &fst) != 0)
            json_object_set_new(rec, "h5", json_null());
    }
    if (!st && set_new_id(summary))
        st = error_set(ST_INTERNAL, "%s: summary id: out of memory", out_dir);
    json_decref(now);
    json_decref(current);
    return st;
}

/* Removes path when it is still the file `known` describes. Race-free
 * against a concurrent run renaming its own report to the same name: the
 * file is first moved aside (rename is atomic), then told by its inode;
 * one that is not the predecessor's goes back under its name unless a
 * newer one took the name meanwhile. */
static int remove_if_same(const char *path, const json_t *known)
{
    char aside[PATH_MAX * 2 + 48];
    struct stat st;
    snprintf(aside, sizeof aside, "%s.%ld.stale.tmp", path, (long)getpid());
    if (rename(path, aside) != 0)
        return 0; /* gone already */
    if (lstat(aside, &st) == 0 && same_file(known, &st)) {
        unlink(aside);
        return 1;
    }
    if (link(aside, path) != 0 && errno != EEXIST)
        rename(aside, path);
    else
        unlink(aside);
    return 0;
}

int stale_reports_clear(const char *out_dir, const json_t *before, const json_t *summary, FILE *out)
{
    json_t *now = json_object();
    if (!now || !before) {
        json_decref(now);
        return 0;
    }
    collect(out_dir, summary, now);
    /* A case this run ran keeps its previous report when its new one could
     * not be written (a full disk): the previous stays whole, never lost. */
    json_t *cases = json_object();
    const json_t *records = json_object_get(summary, "records");
    for (size_t i = 0; cases && i < json_array_size(records); i++)
        json_object_set_new(cases, summary_str(json_array_get(records, i), "case"), json_true());
    int removed = 0;
    const char *key;
    json_t *old;
    json_object_foreach(json_object_get(before, "reports"), key, old) {
        if (!cases || json_object_get(now, key) || json_object_get(cases, summary_str(old, "case")))
            continue;
        removed += remove_if_same(summary_str(old, "path"), old);
    }
    json_decref(cases);
    json_decref(now);
    if (removed)
        fprintf(out, "removed %d report(s) of the previous run in %s that this run did not write again (its "
                     "summary.json named them)\n",
                removed, out_dir);
    return removed;
}
