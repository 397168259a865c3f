#include "stale_reports.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "summary_file.h"

/* A record's h5 when it is a regular .h5 file directly in out_dir (a
 * bare name is relative to out_dir, as a merged summary writes it): its
 * file name in key (one name in one directory, however the path is
 * spelled; not its inode: a report rewritten is a new inode under the
 * same name), its path in path. 0 for anything else: only this run
 * directory's own reports count. */
static int own_report(const char *out_dir, const struct stat *dir_st, const char *h5, char *key, size_t key_len,
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
    struct stat st, parent_st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || stat(parent, &parent_st) != 0 ||
        parent_st.st_dev != dir_st->st_dev || parent_st.st_ino != dir_st->st_ino)
        return 0;
    snprintf(key, key_len, "%s", slash ? slash + 1 : h5);
    return 1;
}

/* Every own report a summary names, into set (file name -> {path, case}). */
static void collect(const char *out_dir, const json_t *summary, json_t *set)
{
    struct stat dir_st;
    char key[PATH_MAX], path[PATH_MAX * 2];
    if (stat(out_dir, &dir_st) != 0)
        return;
    const json_t *records = json_object_get(summary, "records");
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        const char *h5 = summary_str(rec, "h5");
        if (h5[0] && own_report(out_dir, &dir_st, h5, key, sizeof key, path, sizeof path))
            json_object_set_new(set, key, json_pack("{s:s, s:s}", "path", path, "case", summary_str(rec, "case")));
    }
}

json_t *stale_reports_before(const char *out_dir)
{
    json_t *set = json_object(), *previous = NULL;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    if (set && access(path, F_OK) == 0 && summary_file_load(out_dir, &previous) == ST_OK)
        collect(out_dir, previous, set);
    error_clear(); /* an unreadable previous summary: nothing to clear */
    json_decref(previous);
    return set;
}

int stale_reports_clear(const char *out_dir, const json_t *before, const json_t *summary, FILE *out)
{
    json_t *now = json_object();
    if (!now || !before)
        return 0;
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
    json_object_foreach((json_t *)before, key, old) {
        if (!cases || json_object_get(now, key) || json_object_get(cases, summary_str(old, "case")))
            continue;
        if (unlink(summary_str(old, "path")) == 0)
            removed++;
    }
    json_decref(cases);
    json_decref(now);
    if (removed)
        fprintf(out, "removed %d report(s) of the previous run in %s that this run did not write again (its "
                     "summary.json named them)\n",
                removed, out_dir);
    return removed;
}
