/* h5store_read_run: the runs of a report: listing them, loading one into a
 * run_record (its datasets within a byte budget, its numeric attributes as
 * "group.key", its outcome texts), checking it holds what every run of
 * the schema holds, and what loading runs would claim, from shapes alone.
 * Links into other files are refused. */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "error.h"
#include "h5store_internal.h"
#include "checked_objects.h"

/* A link that is not a hard link where a run, group or dataset should be:
 * a soft link (named with its target) or another file's link is not part
 * of the run, and reading past it would make the run look as if it lacked
 * what the link stands for. */
int h5store_link_not_hard(hid_t group, const char *name, const H5L_info_t *info, const char *file,
                          const char *where, const char *expected)
{
    if (info->type == H5L_TYPE_EXTERNAL)
        return error_set(ST_INPUT, "%s: %s: external link to another file is not supported", file, where);
    if (info->type == H5L_TYPE_SOFT) {
        char target[256] = "?";
        size_t size = info->u.val_size;
        if (size > 0 && size <= sizeof target && H5Lget_val(group, name, target, sizeof target, H5P_DEFAULT) >= 0)
            target[sizeof target - 1] = '\0';
        else
            snprintf(target, sizeof target, "?");
        return error_set(ST_INPUT, "%s: %s: a soft link (to %s), not %s: a report keeps what runs share as hard "
                         "links", file, where, target, expected);
    }
    return error_set(ST_INPUT, "%s: %s: a user-defined link (type %d), not %s", file, where, (int)info->type,
                     expected);
}

/* ---- listing runs --------------------------------------------------- */

struct run_list {
    const char *file;
    char (*names)[64];
    int n, cap;
    int status;
};

static herr_t list_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    struct run_list *l = data;
    if (info->type == H5L_TYPE_EXTERNAL) {
        l->status = error_set(ST_INPUT, "%s: /runs/%s: external link to another file is not supported", l->file,
                              name);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
        char where[96];
        snprintf(where, sizeof where, "/runs/%.63s", name);
        l->status = h5store_link_not_hard(group, name, info, l->file, where, "a run group");
        return -1;
    }
    hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        l->status = h5store_fail(ST_INPUT, l->file, "/runs", "unreadable entry %s", name);
        return -1;
    }
    int is_group = H5Iget_type(obj) == H5I_GROUP;
    H5Oclose(obj);
    if (!is_group)
        return 0;
    if (strlen(name) >= sizeof l->names[0]) {
        l->status = error_set(ST_INPUT, "%s: /runs/%s: run name longer than 63 bytes", l->file,
                              name);
        return -1;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char(*names)[64] = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) {
            l->status = error_set(ST_INTERNAL, "%s: out of memory listing runs", l->file);
            return -1;
        }
        l->names = names;
        l->cap = cap;
    }
    strcpy(l->names[l->n++], name);
    return 0;
}

int h5report_list_runs(struct h5report *rep, char (**names)[64], int *count)
{
    h5store_silence_hdf5();
    *names = NULL;
    *count = 0;
    const char *path = rep->path;
    hid_t f = rep->file;
    int rc = ST_OK;
    struct run_list l = {path, NULL, 0, 0, ST_OK};
    hid_t g = H5I_INVALID_HID;
    if (!h5store_path_exists(f, "/runs") || (g = H5Gopen2(f, "/runs", H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: /runs: group missing", path);
    else if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, list_link, &l) < 0)
        rc = l.status != ST_OK ? l.status : h5store_fail(ST_INPUT, path, "/runs", "cannot list runs");
    if (g >= 0)
        H5Gclose(g);
    if (rc != ST_OK) {
        free(l.names);
        return rc;
    }
    *names = l.names;
    *count = l.n;
    return ST_OK;
}

struct name_list {
    char *buf;
    size_t len, cap;
    int n, status;
};

static herr_t add_name(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    (void)group;
    (void)info;
    struct name_list *l = data;
    size_t n = strlen(name) + 1;
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        while (cap < l->len + n)
            cap *= 2;
        char *buf = realloc(l->buf, cap);
        if (!buf) {
            l->status = error_set(ST_INTERNAL, "out of memory listing names");
            return -1;
        }
        l->buf = buf;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, name, n);
    l->len += n;
    l->n++;
    return 0;
}

int h5report_list_names(struct h5report *rep, const char *group, char **names, int *count)
{
    h5store_silence_hdf5();
    *names = NULL;
    *count = 0;
    if (!h5store_path_exists(rep->file, group))
        return ST_OK;
    struct name_list l = {NULL, 0, 0, 0, ST_OK};
    int rc = ST_OK;
    hid_t g = H5Gopen2(rep->file, group, H5P_DEFAULT);
    if (g < 0)
        rc = h5store_fail(ST_INPUT, rep->path, group, "not a group");
    else if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, add_name, &l) < 0)
        rc = l.status != ST_OK ? l.status : h5store_fail(ST_INPUT, rep->path, group, "cannot list it");
    if (g >= 0)
        H5Gclose(g);
    if (rc != ST_OK) {
        free(l.buf);
        return rc;
    }
    *names = l.buf;
    *count = l.n;
    return ST_OK;
}

int h5store_list_runs(const char *path, char (**names)[64], int *count)
{
    *names = NULL;
    *count = 0;
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    if (rc == ST_OK)
        rc = h5report_list_runs(rep, names, count);
    h5report_close(rep);
    return rc;
}

int h5store_check_run(const char *path, const struct run_record *r)
{
    int steps = 0;
    for (int i = 0; i < r->n; i++) {
        const char *p = r->items[i].path;
        if (strncmp(p, "steps/", 6) != 0)
            continue;
        const char *k = p + 6;
        size_t digits = strspn(k, "0123456789");
        if (digits == 0 || k[digits] != '/')
            return error_set(ST_INPUT, "%s: /runs/%s/%s: not under a numbered step (steps/<k>/...)",
                             path, r->name, p);
        steps++;
        /* Each step's loss is checked once, from the step's first entry;
         * the reader sorts the loss first within its step. */
        char loss[RUN_PATH_MAX];
        snprintf(loss, sizeof loss, "steps/%.*s/loss", (int)digits, k);
        if (i > 0 && strncmp(r->items[i - 1].path, p, 6 + digits + 1) == 0)
            continue;
        const struct run_tensor *t = run_record_find(r, loss);
        if (!t)
            return error_set(ST_INPUT, "%s: /runs/%s/%s: dataset missing", path, r->name, loss);
        if (t->t.numel != 1)
            return error_set(ST_INPUT, "%s: /runs/%s/%s: holds %zu values, expected one", path,
                             r->name, loss, t->t.numel);
    }
    if (steps == 0)
        return error_set(ST_INPUT, "%s: /runs/%s/steps: no step recorded", path, r->name);
    return ST_OK;
}

/* ---- reading a run -------------------------------------------------- */

struct run_visit {
    const char *file;
    const char *run_path; /* "/runs/<run>" */
    struct run_record *rec;
    uint64_t *budget; /* bytes the read may still load */
    const char *prefix; /* subgroup path for attribute keys, NULL for the run group */
    int status;
    int stored; /* datasets are described, not loaded (h5store_read_run_stored) */
};

/* Numeric single-value attributes of a group become run attributes: on the
 * run group "key", on a subgroup "<subgroup path>.key". Others (strings,
 * arrays, enums) are not numeric facts about the run and are skipped. */
static herr_t visit_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    struct run_visit *v = data;
    char key[RUN_ATTR_KEY_MAX];
    char where[RUN_PATH_MAX + 80];
    snprintf(where, sizeof where, "%s%s%s", v->run_path, v->prefix ? "/" : "",
             v->prefix ? v->prefix : "");
    struct h5store_open_attr o = h5store_attr_open(loc, name);
    hid_t a = o.a, t = o.type, sp = o.space;
    if (t < 0 || sp < 0) {
        v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable attribute %s", name);
    } else {
        H5T_class_t cls = H5Tget_class(t);
        /* Short words into their fixed fields; every other text whole,
         * at any length (run_record.h). */
        char *word = NULL;
        size_t word_len = 0;
        struct text *text = NULL;
        struct run_record *rec = v->rec;
        if (!v->prefix && cls == H5T_STRING) {
            static const char *const text_names[] = {"message", "warning", "noise_cause", "op_log",
                                                     "memory_statement", "memory_still_held", "memory_kept",
                                                     "not_observable", "class_patches", "memory_extra",
                                                     "memory_declared", "memory_state"};
            struct text *texts[] = {&rec->message, &rec->warning, &rec->noise_cause, &rec->op_log,
                                    &rec->memory_statement, &rec->memory_still_held, &rec->memory_kept,
                                    &rec->not_observable, &rec->class_patches, &rec->memory_extra,
                                    &rec->memory_declared, &rec->memory_state};
            for (size_t i = 0; i < sizeof texts / sizeof *texts && !text; i++)
                if (strcmp(name, text_names[i]) == 0)
                    text = texts[i];
            if (strcmp(name, "outcome") == 0)
                word = rec->outcome, word_len = sizeof rec->outcome;
            else if (strcmp(name, "baselines") == 0)
                word = rec->baselines, word_len = sizeof rec->baselines;
            else if (strcmp(name, "twin_of") == 0)
                word = rec->twin_of, word_len = sizeof rec->twin_of;
            else if (strcmp(name, "role") == 0)
                word = rec->role, word_len = sizeof rec->role;
        }
        if (text) {
            char *value = NULL;
            int got = h5store_attr_string_alloc(a, &value);
            if (got == -1)
                v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable attribute %s", name);
            else if (got == -3)
                v->status = error_set(ST_INTERNAL, "%s: %s: out of memory reading attribute %s", v->file, where,
                                      name);
            else if (got == 1)
                v->status = text_set(text, value);
            free(value);
        } else if (word) {
            int got = h5store_attr_string(a, word, word_len);
            if (got == -1)
                v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable attribute %s", name);
            else if (got == -2)
                v->status = error_set(ST_INPUT, "%s: %s: attribute %s longer than %zu bytes", v->file, where, name,
                                      word_len - 1);
            else if (strcmp(name, "outcome") == 0 && word[0] && strcmp(word, RUN_OUTCOME_ERROR) &&
                     strcmp(word, RUN_OUTCOME_CHECK_FAILED))
                v->status = error_set(ST_INPUT, "%s: %s: attribute outcome is '%s', expected '%s' or '%s'", v->file,
                                      where, word, RUN_OUTCOME_ERROR, RUN_OUTCOME_CHECK_FAILED);
        } else if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Sget_simple_extent_npoints(sp) == 1) {
            double value;
            int n = snprintf(key, sizeof key, "%s%s%s", v->prefix ? v->prefix : "",
                             v->prefix ? "." : "", name);
            if (n < 0 || (size_t)n >= sizeof key)
                v->status = error_set(ST_INPUT, "%s: %s: attribute key %s.%s longer than %d bytes",
                                      v->file, where, v->prefix ? v->prefix : "", name,
                                      RUN_ATTR_KEY_MAX - 1);
            else if (H5Aread(a, H5T_NATIVE_DOUBLE, &value) < 0)
                v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable attribute %s", name);
            else
                v->status = run_record_set_attr(v->rec, key, value);
        }
    }
    h5store_attr_close(&o);
    return v->status == ST_OK ? 0 : -1;
}

static int group_attrs(hid_t group, struct run_visit *v, const char *prefix)
{
    v->prefix = prefix;
    herr_t rc = H5Aiterate2(group, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_attr, v);
    if (rc < 0 && v->status == ST_OK)
        v->status = h5store_fail(ST_INPUT, v->file, v->run_path, "cannot list attributes");
    return v->status;
}

static herr_t visit_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    struct run_visit *v = data;
    char where[RUN_PATH_MAX * 2 + 80];
    snprintf(where, sizeof where, "%s/%s", v->run_path, name);
    /* A report is one file: an external link would make another file's
     * data pass for this run's (or drop a step unseen). */
    if (info->type == H5L_TYPE_EXTERNAL) {
        v->status = error_set(ST_INPUT, "%s: %s: external link to another file is not supported", v->file, where);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
        v->status = h5store_link_not_hard(group, name, info, v->file, where, "a dataset or group");
        return -1;
    }
    hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable object");
        return -1;
    }
    H5I_type_t type = H5Iget_type(obj);
    if (type == H5I_DATASET) {
        struct host_tensor t;
        if (strlen(name) >= RUN_PATH_MAX)
            v->status = error_set(ST_INPUT, "%s: %s: path longer than %d bytes", v->file, where,
                                  RUN_PATH_MAX - 1);
        else if (v->stored) {
            unsigned char id[16];
            long long crc = -1;
            if ((v->status = h5store_describe_dataset(obj, v->file, where, &t)) == ST_OK &&
                (v->status = h5store_read_crc32(obj, v->file, where, &crc)) == ST_OK) {
                if (h5store_object_id(obj, id) < 0)
                    v->status = h5store_fail(ST_INPUT, v->file, where, "unreadable object identity");
                else
                    v->status = run_record_add_stored(v->rec, name, &t, id, crc);
            }
        } else if ((v->status = h5store_load_dataset(obj, v->file, where, &t, v->budget)) == ST_OK &&
                   (v->status = run_record_add(v->rec, name, &t)) != ST_OK)
            host_tensor_free(&t);
    } else if (type == H5I_GROUP) {
        group_attrs(obj, v, name);
    }
    H5Oclose(obj);
    return v->status == ST_OK ? 0 : -1;
}

/* ST_INPUT when the link at an absolute path is not a hard link (one
 * into another file, a soft link). */
static int check_not_external(hid_t f, const char *file, const char *link)
{
    H5L_info_t info;
    if (H5Lget_info(f, link, &info, H5P_DEFAULT) >= 0 && info.type != H5L_TYPE_HARD)
        return h5store_link_not_hard(f, link, &info, file, link, "a group");
    return ST_OK;
}

static int read_run(struct h5report *rep, const char *run, uint64_t *budget, int stored, struct run_record *out);

int h5report_read_run_within(struct h5report *rep, const char *run, uint64_t *budget, struct run_record *out)
{
    return read_run(rep, run, budget, 0, out);
}

int h5store_read_run(const char *path, const char *run, struct run_record *out)
{
    run_record_init(out, run ? run : "");
    uint64_t budget = H5STORE_READ_LIMIT;
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    if (rc == ST_OK)
        rc = h5report_read_run_within(rep, run, &budget, out);
    h5report_close(rep);
    return rc;
}

/* A stored run read through rep: its source is rep's path and file. */
static int read_run_stored(struct h5report *rep, const char *run, struct run_record *out)
{
    int rc = read_run(rep, run, NULL, 1, out);
    if (rc == ST_OK && (rc = run_record_set_source(out, rep->path)) != ST_OK)
        run_record_free(out);
    if (rc == ST_OK && rep->ino) {
        out->source_dev = rep->dev;
        out->source_ino = rep->ino;
    }
    return rc;
}

int h5report_read_run_stored(struct h5report *rep, const char *run, struct run_record *out)
{
    int rc = read_run_stored(rep, run, out);
    if (rc != ST_OK)
        return rc;
    /* The run holds this handle's file, one more reference to one open. */
    if (H5Iinc_ref(rep->file) < 0) {
        rc = h5store_fail(ST_INTERNAL, rep->path, NULL, "cannot hold the open report");
        run_record_free(out);
        return rc;
    }
    out->source_file = (int64_t)rep->file;
    return ST_OK;
}

int h5store_read_run_stored(const char *path, const char *run, struct run_record *out)
{
    run_record_init(out, run ? run : "");
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    if (rc == ST_OK)
        rc = read_run_stored(rep, run, out);
    h5report_close(rep);
    return rc;
}

int h5store_load_stored(const struct run_record *r, const struct run_tensor *t, uint64_t limit,
                        struct host_tensor *out)
{
    h5store_silence_hdf5();
    memset(out, 0, sizeof *out);
    if (!r->source)
        return error_set(ST_INTERNAL, "/runs/%s/%s: stored tensor of a run read from no report", r->name, t->path);
    char where[RUN_PATH_MAX + 80];
    snprintf(where, sizeof where, "/runs/%s/%s", r->name, t->path);
    hid_t f = (hid_t)r->source_file;
    int rc = f > 0 ? ST_OK : h5store_open_report(r->source, &f);
    if (rc != ST_OK)
        return rc;
    hid_t ds = H5I_INVALID_HID;
    uint64_t budget = limit;
    /* A baseline is read once per run compared with it: its bytes are
     * checksummed the first time only. */
    int verified = r->checked && checked_objects_has(r->checked, r, t);
    if (!h5store_path_exists(f, where) || (ds = H5Dopen2(f, where, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: dataset missing (the report changed while it was read)", r->source, where);
    else if ((rc = verified ? h5store_load_verified_dataset(ds, r->source, where, out, &budget)
                            : h5store_load_dataset(ds, r->source, where, out, &budget)) == ST_OK &&
             (out->dtype != t->t.dtype || out->numel != t->t.numel)) {
        host_tensor_free(out);
        rc = error_set(ST_INPUT, "%s: %s: dataset changed while the report was read", r->source, where);
    }
    if (ds >= 0)
        H5Dclose(ds);
    if (f != (hid_t)r->source_file)
        H5Fclose(f);
    /* Loaded, so its checksum was verified: the sweep need not read it. */
    if (rc == ST_OK && r->checked && !verified && (rc = checked_objects_add(r->checked, r, t)) != ST_OK)
        host_tensor_free(out);
    return rc;
}

int h5store_verify_stored(const struct run_record *r, const struct run_tensor *t)
{
    h5store_silence_hdf5();
    if (!t->stored || t->crc32 < 0)
        return ST_OK;
    if (!r->source)
        return error_set(ST_INTERNAL, "/runs/%s/%s: stored tensor of a run read from no report", r->name, t->path);
    char where[RUN_PATH_MAX + 80];
    snprintf(where, sizeof where, "/runs/%s/%s", r->name, t->path);
    hid_t f = (hid_t)r->source_file;
    int rc = f > 0 ? ST_OK : h5store_open_report(r->source, &f);
    if (rc != ST_OK)
        return rc;
    hid_t ds = H5I_INVALID_HID;
    if (!h5store_path_exists(f, where) || (ds = H5Dopen2(f, where, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: dataset missing (the report changed while it was read)", r->source, where);
    else
        rc = h5store_check_stored_crc32(ds, r->source, where, t->crc32);
    if (ds >= 0)
        H5Dclose(ds);
    if (f != (hid_t)r->source_file)
        H5Fclose(f);
    if (rc == ST_OK && r->checked)
        rc = checked_objects_add(r->checked, r, t);
    return rc;
}

int h5store_hold_source(struct run_record *r)
{
    _Static_assert(sizeof(hid_t) <= sizeof r->source_file, "an hid_t fits run_record.source_file");
    h5store_silence_hdf5();
    if (r->source_file > 0)
        return ST_OK;
    if (!r->source)
        return error_set(ST_INTERNAL, "/runs/%s: holding the report of a run read from no report", r->name);
    hid_t f;
    int rc = h5store_open_report(r->source, &f);
    if (rc == ST_OK)
        r->source_file = (int64_t)f;
    return rc;
}

void h5store_let_go_source(struct run_record *r)
{
    if (r->source_file > 0)
        H5Fclose((hid_t)r->source_file);
    r->source_file = 0;
}

static int read_run(struct h5report *rep, const char *run, uint64_t *budget, int stored, struct run_record *out)
{
    h5store_silence_hdf5();
    run_record_init(out, run ? run : "");
    const char *path = rep->path;
    hid_t f = rep->file;
    int rc = ST_OK;
    char run_path[sizeof out->name + 8];
    snprintf(run_path, sizeof run_path, "/runs/%s", out->name);
    struct run_visit v = {path, run_path, out, budget, NULL, ST_OK, stored};
    hid_t g = H5I_INVALID_HID;
    if (!run || !run[0] || strchr(run, '/') || strlen(run) >= sizeof out->name ||
        !h5store_path_exists(f, run_path)) {
        rc = error_set(ST_INPUT, "%s: /runs/%s: run missing", path, run ? run : "");
    } else if ((rc = check_not_external(f, path, "/runs")) || (rc = check_not_external(f, path, run_path))) {
        /* message set */
    } else if ((g = H5Gopen2(f, run_path, H5P_DEFAULT)) < 0) {
        rc = error_set(ST_INPUT, "%s: /runs/%s: run missing", path, run ? run : "");
    } else if ((rc = group_attrs(g, &v, NULL)) == ST_OK &&
               H5Lvisit(g, H5_INDEX_NAME, H5_ITER_INC, visit_link, &v) < 0) {
        rc = v.status != ST_OK ? v.status : h5store_fail(ST_INPUT, path, run_path, "cannot walk run");
    }
    if (g >= 0)
        H5Gclose(g);
    if (rc != ST_OK) {
        run_record_free(out);
        return rc;
    }
    run_record_sort(out);
    return ST_OK;
}

/* ---- what a read would load ----------------------------------------- */

struct claim_visit {
    const char *file;
    uint64_t bytes, largest;
    int status;
};

static herr_t claim_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    struct claim_visit *v = data;
    if (info->type != H5L_TYPE_HARD)
        return 0; /* an external link is refused when the run is read */
    hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        v->status = h5store_fail(ST_INPUT, v->file, name, "unreadable object");
        return -1;
    }
    if (H5Iget_type(obj) == H5I_DATASET) {
        hid_t space = H5Dget_space(obj), type = H5Dget_type(obj);
        int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        hsize_t dims[H5S_MAX_RANK];
        uint64_t bytes = type >= 0 ? (uint64_t)H5Tget_size(type) : 0;
        if (ndim > 0 && H5Sget_simple_extent_dims(space, dims, NULL) >= 0)
            for (int i = 0; i < ndim; i++)
                bytes = dims[i] && bytes > UINT64_MAX / dims[i] ? UINT64_MAX : bytes * dims[i];
        v->bytes = bytes > UINT64_MAX - v->bytes ? UINT64_MAX : v->bytes + bytes;
        if (bytes > v->largest)
            v->largest = bytes;
        if (space >= 0)
            H5Sclose(space);
        if (type >= 0)
            H5Tclose(type);
    }
    H5Oclose(obj);
    return 0;
}

int h5report_claimed_bytes(struct h5report *rep, const char *run, uint64_t *bytes, uint64_t *largest)
{
    h5store_silence_hdf5();
    *bytes = 0;
    if (largest)
        *largest = 0;
    const char *path = rep->path;
    hid_t f = rep->file;
    int rc = ST_OK;
    char where[128];
    snprintf(where, sizeof where, "/runs%s%s", run ? "/" : "", run ? run : "");
    struct claim_visit v = {path, 0, 0, ST_OK};
    hid_t g = H5I_INVALID_HID;
    if (run && (strchr(run, '/') || strlen(run) > 64))
        rc = error_set(ST_INPUT, "%s: /runs/%s: run missing", path, run);
    else if (!h5store_path_exists(f, where))
        rc = error_set(ST_INPUT, "%s: %s: %s missing", path, where, run ? "run" : "group");
    else if ((rc = check_not_external(f, path, "/runs")) || (run && (rc = check_not_external(f, path, where)))) {
        /* message set */
    } else if ((g = H5Gopen2(f, where, H5P_DEFAULT)) < 0)
        rc = h5store_fail(ST_INPUT, path, where, "not a group");
    else if (H5Lvisit(g, H5_INDEX_NAME, H5_ITER_INC, claim_link, &v) < 0)
        rc = v.status != ST_OK ? v.status : h5store_fail(ST_INPUT, path, where, "cannot walk it");
    if (g >= 0)
        H5Gclose(g);
    *bytes = v.bytes;
    if (largest)
        *largest = v.largest;
    return rc;
}
