#include "merge_reports.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "summary_file.h"
#include "temp_file.h"

#define PATH_LEN 4096

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int is_file(const char *path, struct stat *st) { return stat(path, st) == 0 && S_ISREG(st->st_mode); }

/* src copied to dst through a temporary renamed into place: a merge that
 * is killed never leaves half a report under the real name. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return error_set(ST_RUN, "merge: cannot read %s: %s", src, strerror(errno));
    char *tmp = NULL;
    int fd, st = temp_file_create(dst, &tmp, &fd);
    if (st) {
        close(in);
        return st;
    }
    static char buf[1 << 16];
    ssize_t got;
    while (!st && (got = read(in, buf, sizeof buf)) != 0) {
        if (got < 0) {
            if (errno != EINTR)
                st = error_set(ST_RUN, "merge: cannot read %s: %s", src, strerror(errno));
            continue;
        }
        for (ssize_t done = 0; !st && done < got;) {
            ssize_t w = write(fd, buf + done, (size_t)(got - done));
            if (w < 0 && errno != EINTR)
                st = error_set(ST_RUN, "merge: cannot write %s: %s", dst, strerror(errno));
            done += w > 0 ? w : 0;
        }
    }
    close(in);
    if (close(fd) != 0 && !st)
        st = error_set(ST_RUN, "merge: cannot write %s: %s", dst, strerror(errno));
    if (st)
        unlink(tmp);
    else
        st = temp_file_publish(tmp, dst);
    free(tmp);
    return st;
}

/* src put at dst: a hard link where the file system allows (no bytes
 * copied), else a copy. A dst that already is src is left alone. */
static int adopt(const char *src, const struct stat *src_st, const char *dst)
{
    struct stat dst_st;
    if (is_file(dst, &dst_st) && dst_st.st_dev == src_st->st_dev && dst_st.st_ino == src_st->st_ino)
        return ST_OK;
    char tmp[PATH_LEN + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.link.tmp", dst, (long)getpid());
    unlink(tmp);
    if (link(src, tmp) == 0) {
        if (rename(tmp, dst) == 0)
            return ST_OK;
        int why = errno;
        unlink(tmp);
        return error_set(ST_RUN, "merge: cannot put %s into place: %s", dst, strerror(why));
    }
    return copy_file(src, dst);
}

/* The name the report takes in out_dir: its file name, unless a report
 * from another source already took it (then "<input>_<name>", and
 * "<input>_<k>_<name>" past that). `taken` maps each name given to its
 * source's "dev:ino". */
static void name_for(json_t *taken, const char *base, const struct stat *st, int input, char *out, size_t len)
{
    char id[64];
    snprintf(id, sizeof id, "%llu:%llu", (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
    snprintf(out, len, "%s", base);
    for (int k = 1; summary_str(taken, out)[0] && strcmp(summary_str(taken, out), id) != 0; k++) {
        if (k == 1)
            snprintf(out, len, "%d_%s", input + 1, base);
        else
            snprintf(out, len, "%d_%d_%s", input + 1, k, base);
    }
    json_object_set_new(taken, out, json_string(id));
}

int merge_adopt_reports(const char *out_dir, json_t *const *roots, const char *const *dirs, int n, FILE *out)
{
    json_t *taken = json_object();
    if (!taken)
        return error_set(ST_INTERNAL, "merge: out of memory");
    int st = ST_OK, lost = 0;
    char first_lost[PATH_LEN] = "";
    for (int i = 0; i < n && !st; i++) {
        json_t *recs = json_object_get(roots[i], "records");
        for (size_t r = 0; r < json_array_size(recs) && !st; r++) {
            json_t *rec = json_array_get(recs, r);
            const json_t *h5 = json_object_get(rec, "h5");
            if (!json_is_string(h5))
                continue;
            const char *path = json_string_value(h5);
            char here[PATH_LEN], name[PATH_LEN], dst[PATH_LEN * 2];
            struct stat src_st;
            snprintf(here, sizeof here, "%s/%s", dirs[i], file_name(path));
            const char *src = is_file(here, &src_st) ? here : is_file(path, &src_st) ? path : NULL;
            if (!src) {
                if (!lost++)
                    snprintf(first_lost, sizeof first_lost, "%s", path);
                json_object_set_new(rec, "h5", json_null());
                continue;
            }
            name_for(taken, file_name(path), &src_st, i, name, sizeof name);
            snprintf(dst, sizeof dst, "%s/%s", out_dir, name);
            if (!(st = adopt(src, &src_st, dst)))
                json_object_set_new(rec, "h5", json_string(name));
        }
    }
    json_decref(taken);
    if (lost)
        fprintf(out, "merge: warning: %d record(s) name a report found neither in their input directory nor at its "
                     "path (first: %s): their h5 is null\n",
                lost, first_lost);
    return st;
}
