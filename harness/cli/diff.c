/* diff: `ckpt-verify diff [--tolerance ULP] [--json] A.h5[:run] B.h5[:run]`
 * compares two runs of any files that follow the schema, tensor by tensor
 * (bitwise; sign-aware ULP distance where bits differ). Exit 1 on a
 * difference beyond the tolerance or a tensor on one side only. */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "compare.h"
#include "error.h"
#include "h5store.h"
#include "run_tensors.h"

/* "file.h5:run" -> file, run (default: baseline_0, else the only run),
 * and the report opened once (*rep, which the caller closes) unless
 * `same` already holds that file open. */
static int split_file_run(const char *arg, char *file, size_t flen, char *run, size_t rlen, struct h5report *same,
                          struct h5report **rep)
{
    *rep = NULL;
    /* An argument that names an existing file is that file, colon or not. */
    struct stat sb;
    const char *colon = stat(arg, &sb) == 0 ? NULL : strrchr(arg, ':');
    int named = colon && strstr(colon, ".h5") == NULL;
    if (named) {
        snprintf(file, flen, "%.*s", (int)(colon - arg), arg);
        snprintf(run, rlen, "%s", colon + 1);
    } else {
        snprintf(file, flen, "%s", arg);
    }
    int st = same && strcmp(h5report_path(same), file) == 0 ? (*rep = same, ST_OK) : h5report_open(rep, file);
    if (st || named)
        return st;
    char (*names)[64] = NULL;
    int count = 0;
    if ((st = h5report_list_runs(*rep, &names, &count)))
        return st;
    run[0] = '\0';
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], "baseline_0") == 0)
            snprintf(run, rlen, "baseline_0");
    if (!run[0] && count > 0)
        snprintf(run, rlen, "%s", names[0]);
    free(names);
    if (!run[0])
        return error_set(ST_INPUT, "%s: no runs under /runs", file);
    return ST_OK;
}

/* A run asked for that the file does not hold: the message lists the runs
 * it does hold, so the next try can name one. */
static int run_missing_hint(struct h5report *rep, int st)
{
    const char *msg = error_message();
    size_t n = strlen(msg);
    char (*names)[64] = NULL;
    int count = 0;
    if (st != ST_INPUT || n < 11 || strcmp(msg + n - 11, "run missing") != 0)
        return st;
    char text[1024];
    snprintf(text, sizeof text, "%s", msg);
    if (h5report_list_runs(rep, &names, &count) || count == 0) {
        free(names);
        return error_set(st, "%s", text);
    }
    size_t used = strlen(text);
    for (int i = 0; i < count && used < sizeof text; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", i ? ", " : " (runs in the file: ", names[i]);
    free(names);
    return error_set(st, "%s)", text);
}

static int diff_in_scope(const char *path)
{
    return strncmp(path, "steps/", 6) == 0 || strncmp(path, "final_params/", 13) == 0;
}

/* A tensor both sides hold with a different dtype or shape means the two
 * files do not record the same model: that is bad input (exit 2), not a
 * finding about checkpointing, so it is refused before anything is printed. */
static int check_comparable(const char *fa, const struct run_record *a, const char *fb,
                            const struct run_record *b)
{
    for (int i = 0; i < a->n; i++) {
        const struct run_tensor *ta = &a->items[i];
        const struct run_tensor *tb = diff_in_scope(ta->path) ? run_record_find(b, ta->path) : NULL;
        if (!tb)
            continue;
        char sa[96], sb[96];
        host_tensor_shape_str(&ta->t, sa, sizeof sa);
        host_tensor_shape_str(&tb->t, sb, sizeof sb);
        if (ta->t.dtype != tb->t.dtype || strcmp(sa, sb) != 0)
            return error_set(ST_INPUT, "%s: /runs/%s/%s: %s %s here but %s %s in %s:/runs/%s/%s: not comparable", fb,
                             b->name, ta->path, dtype_name(tb->t.dtype), sb, dtype_name(ta->t.dtype), sa, fa,
                             a->name, ta->path);
    }
    return ST_OK;
}

/* The raw bits of element i, for showing which NaN payloads differ. */
static unsigned long long element_bits(const struct host_tensor *t, size_t i)
{
    size_t size = dtype_size(t->dtype);
    unsigned char bytes[8] = {0};
    unsigned long long v = 0;
    memcpy(bytes, (const unsigned char *)t->data + i * size, size);
    for (size_t k = size; k-- > 0;) /* little-endian host, as h5store reads it */
        v = v << 8 | bytes[k];
    return v;
}

struct nonfinite_totals {
    size_t nan_a, nan_b, inf_a, inf_b;
};

/* One line per tensor that differs, and one per identical tensor holding
 * NaN or Inf: an all-NaN gradient in both runs is bitwise equal but never
 * silently so. */
static void print_tensor_diff(FILE *out, const struct run_tensor *ta, const struct host_tensor *da,
                              const struct host_tensor *db, const struct tensor_diff *d,
                              struct nonfinite_totals *totals)
{
    char ulp[32], idx[96];
    totals->nan_a += d->nan_a;
    totals->nan_b += d->nan_b;
    totals->inf_a += d->inf_a;
    totals->inf_b += d->inf_b;
    if (d->bitwise_equal) {
        if (d->nan_a || d->inf_a)
            fprintf(out, "  %-40s identical, including NaN %zu/%zu, Inf %zu/%zu (bit patterns equal)\n", ta->path,
                    d->nan_a, d->nan_b, d->inf_a, d->inf_b);
        return;
    }
    host_tensor_index_str(&ta->t, d->first_index, idx, sizeof idx);
    if (d->integer) { /* counts: compared as values, no ULP exists */
        fprintf(out, "  %-40s %zu of %zu differ; first at %s (%.0f vs %.0f); values differ by up to %llu (an integer "
                     "tensor)\n",
                ta->path, d->n_differ, d->count, idx, d->first_a, d->first_b,
                (unsigned long long)d->max_value_diff);
        return;
    }
    fprintf(out, "  %-40s %zu of %zu differ; first at %s (%.9g vs %.9g", ta->path, d->n_differ, d->count, idx,
            d->first_a, d->first_b);
    /* Two NaNs print alike; only their bits show the difference. */
    if (isnan(d->first_a) || isnan(d->first_b)) {
        int digits = (int)dtype_size(ta->t.dtype) * 2;
        fprintf(out, "; bits 0x%0*llx vs 0x%0*llx", digits, element_bits(da, d->first_index), digits,
                element_bits(db, d->first_index));
    }
    /* The judge's measure first, as its table shows it; raw beside it. */
    char scaled[32];
    double scale = 0;
    scaled_ulp_format(compare_scaled_distance(da, db, &scale), scaled, sizeof scaled);
    fprintf(out, "); max scaled ULP %s (at max |A| %.3g); raw max ULP %s; max abs %.3g; NaN %zu/%zu, Inf %zu/%zu\n",
            scaled, scale, ulp_format(d->max_ulp, ulp, sizeof ulp), d->max_abs, d->nan_a, d->nan_b, d->inf_a,
            d->inf_b);
}

struct diff_options {
    double tolerance; /* ULP: differences up to this are reported but not a difference (exit 0) */
    int json;         /* one JSON object on stdout instead of the text */
};

/* One tensor pair as JSON: what the text line says, field by field. */
static json_t *tensor_diff_json(const struct run_tensor *ta, const struct host_tensor *da, const struct host_tensor *db,
                               const struct tensor_diff *d, const char *status)
{
    char idx[96] = "";
    if (!d->bitwise_equal)
        host_tensor_index_str(&ta->t, d->first_index, idx, sizeof idx);
    json_t *o = json_pack("{s:s, s:s, s:I, s:I}", "path", ta->path, "status", status, "count", (json_int_t)d->count,
                          "n_differ", (json_int_t)d->n_differ);
    if (!d->bitwise_equal) {
        json_object_set_new(o, "first_index", json_string(idx));
        json_object_set_new(o, "first_a", isfinite(d->first_a) ? json_real(d->first_a) : json_null());
        json_object_set_new(o, "first_b", isfinite(d->first_b) ? json_real(d->first_b) : json_null());
        if (d->integer) { /* values (counts), never ULPs */
            json_object_set_new(o, "max_value_diff", json_integer((json_int_t)d->max_value_diff));
        } else {
            double scaled = compare_scaled_distance(da, db, NULL);
            json_object_set_new(o, "max_scaled_ulp",
                                isinf(scaled) || isnan(scaled) ? json_null() : json_real(scaled));
            json_object_set_new(o, "max_ulp",
                                d->max_ulp == ULP_INFINITE ? json_null() : json_integer((json_int_t)d->max_ulp));
        }
        json_object_set_new(o, "max_abs", json_real(d->max_abs));
    }
    json_object_set_new(o, "nan_a", json_integer((json_int_t)d->nan_a));
    json_object_set_new(o, "nan_b", json_integer((json_int_t)d->nan_b));
    json_object_set_new(o, "inf_a", json_integer((json_int_t)d->inf_a));
    json_object_set_new(o, "inf_b", json_integer((json_int_t)d->inf_b));
    return o;
}

/* The comparison; its text goes to `text` (JSON to stdout). */
static int diff_runs_to(FILE *text, const char *fa, const struct run_record *a, const char *fb,
                        const struct run_record *b, const struct diff_options *o)
{
    int st;
    if ((st = h5store_check_run(fa, a)) || (st = h5store_check_run(fb, b)) ||
        (st = check_comparable(fa, a, fb, b)))
        return cli_fail(st);
    json_t *tensors = o->json ? json_array() : NULL;
    if (!o->json)
        fprintf(text,
                "diff %s:%s vs %s:%s (bitwise; where bits differ, max scaled ULP: |A - B| in ULPs of the dtype at "
                "the tensor's max |A|, the distance the judge's table shows; raw max ULP: element-wise, sign-aware%s)\n",
                fa, a->name, fb, b->name, o->tolerance > 0 ? "; the tolerance is in raw ULP" : "");
    int differ = 0, beyond = 0, compared = 0, missing = 0, one_object = 0;
    struct nonfinite_totals totals = {0};
    for (int i = 0; i < a->n; i++) {
        const struct run_tensor *ta = &a->items[i];
        if (!diff_in_scope(ta->path))
            continue;
        const struct run_tensor *tb = run_record_find(b, ta->path);
        if (!tb) {
            if (o->json)
                json_array_append_new(tensors, json_pack("{s:s, s:s}", "path", ta->path, "status", "only_in_a"));
            else
                fprintf(text, "  %-40s only in A\n", ta->path);
            missing++;
            continue;
        }
        /* Two paths that reach one HDF5 object (a file against itself, a
         * run's tensor hard-linked to the other run's) hold the same bytes:
         * equal without comparing, read once only to verify its checksum. */
        if (run_tensors_same_object(a, ta, b, tb)) {
            if (!(a->checked && checked_objects_has(a->checked, a, ta)) && (st = h5store_verify_stored(a, ta))) {
                json_decref(tensors);
                return cli_fail(st);
            }
            compared++;
            one_object++;
            if (o->json)
                json_array_append_new(tensors, json_pack("{s:s, s:s, s:b}", "path", ta->path, "status", "identical",
                                                         "same_object", 1));
            continue;
        }
        /* One tensor of each side is held at a time (stored runs). */
        struct tensor_diff d;
        struct tensor_hold ha, hb;
        if ((st = run_tensor_acquire(a, ta, &ha)) == ST_OK && (st = run_tensor_acquire(b, tb, &hb)) != ST_OK)
            run_tensor_release(&ha);
        if (st == ST_OK && (st = compare_tensors(&ha.t, &hb.t, &d))) {
            run_tensor_release(&ha);
            run_tensor_release(&hb);
        }
        if (st) {
            json_decref(tensors);
            return cli_fail(st);
        }
        compared++;
        differ += !d.bitwise_equal;
        /* A tolerance is in ULPs: integer values that differ are never within it. */
        int within = !d.bitwise_equal && !d.integer && d.max_ulp != ULP_INFINITE && (double)d.max_ulp <= o->tolerance;
        beyond += !d.bitwise_equal && !within;
        if (o->json)
            json_array_append_new(tensors, tensor_diff_json(ta, &ha.t, &hb.t, &d, d.bitwise_equal ? "identical"
                                                                    : within         ? "within_tolerance"
                                                                                     : "differs"));
        else
            print_tensor_diff(text, ta, &ha.t, &hb.t, &d, &totals);
        run_tensor_release(&ha);
        run_tensor_release(&hb);
    }
    for (int i = 0; i < b->n; i++)
        if (diff_in_scope(b->items[i].path) && !run_record_find(a, b->items[i].path)) {
            if (o->json)
                json_array_append_new(tensors,
                                      json_pack("{s:s, s:s}", "path", b->items[i].path, "status", "only_in_b"));
            else
                fprintf(text, "  %-40s only in B\n", b->items[i].path);
            missing++;
        }
    const char *result = beyond || missing ? "different" : differ ? "within_tolerance" : "identical";
    if (o->json) {
        json_t *out = json_pack("{s:{s:s, s:s}, s:{s:s, s:s}, s:s, s:f, s:o, s:{s:i, s:i, s:i, s:i, s:i, s:s}}",
                                "a", "file", fa, "run", a->name, "b", "file", fb, "run", b->name, "compared",
                                "bitwise; where bits differ max_scaled_ulp (ULPs of the dtype at max |A|, as the judge) and "
                                "max_ulp (raw, element-wise, sign-aware)", "tolerance_ulp", o->tolerance,
                                "tensors", tensors, "summary", "compared", compared, "differ", differ,
                                "beyond_tolerance", beyond, "missing", missing, "same_object", one_object, "result",
                                result);
        if (!out || json_dumpf(out, stdout, JSON_INDENT(2)) != 0) {
            json_decref(out);
            return cli_fail(error_set(ST_INTERNAL, "diff: cannot write JSON"));
        }
        printf("\n");
        json_decref(out);
    } else {
        fprintf(text, "%d tensors compared: %d differ", compared, differ);
        if (o->tolerance > 0)
            fprintf(text, " (%d beyond %g ULP)", beyond, o->tolerance);
        fprintf(text, ", %d missing on one side", missing);
        if (one_object)
            fprintf(text, " (%d of them one HDF5 object on both sides: equal, read once for its checksum, NaN/Inf not "
                          "counted)",
                    one_object);
        if (totals.nan_a || totals.nan_b || totals.inf_a || totals.inf_b)
            fprintf(text, "; NaN %zu/%zu, Inf %zu/%zu", totals.nan_a, totals.nan_b, totals.inf_a, totals.inf_b);
        fprintf(text, " -> %s\n", beyond || missing ? "DIFFERENT"
                                  : differ          ? "within the tolerance"
                                                    : "bitwise identical");
    }
    return beyond || missing ? EXIT_UNEXPECTED : 0;
}

/* The text is kept until the comparison ends: a file found corrupt or
 * malformed half-way is one line on stderr, with nothing before it on
 * stdout. */
static int diff_runs(const char *fa, const struct run_record *a, const char *fb, const struct run_record *b,
                     const struct diff_options *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *text = open_memstream(&buf, &len);
    if (!text)
        return cli_fail(error_set(ST_INTERNAL, "diff: out of memory"));
    int code = diff_runs_to(text, fa, a, fb, b, o);
    fclose(text);
    if (code != EXIT_USAGE && code != EXIT_INTERNAL)
        fwrite(buf, 1, len, stdout);
    free(buf);
    return code;
}

/* Compares run ra of one open report with run rb of another (or the
 * same): everything, sizes first, is read through the two handles. */
static int diff_reports(struct h5report *rep_a, const char *ra, struct h5report *rep_b, const char *rb,
                        const struct diff_options *o)
{
    const char *fa = h5report_path(rep_a), *fb = h5report_path(rep_b);
    struct run_record a, b;
    struct read_budget budget;
    uint64_t claim_a, claim_b, largest_a, largest_b;
    char what[2200];
    int st;
    if ((st = cli_read_budget(&budget)))
        return cli_fail(st);
    /* The runs are read as stored tensors and compared one pair at a time:
     * what must fit is the largest dataset of each side, checked from the
     * shapes before anything is loaded (a small file can claim a huge one). */
    if ((st = h5report_claimed_bytes(rep_a, ra, &claim_a, &largest_a)))
        return cli_fail(run_missing_hint(rep_a, st));
    if ((st = h5report_claimed_bytes(rep_b, rb, &claim_b, &largest_b)))
        return cli_fail(run_missing_hint(rep_b, st));
    snprintf(what, sizeof what, "%s:/runs/%s with %s:/runs/%s", fa, ra, fb, rb);
    if ((st = cli_check_held(&budget, what, largest_a > largest_b ? largest_a : largest_b, 2)))
        return cli_fail(st);
    /* Each run holds its report's handle, not a new open. */
    if ((st = h5report_read_run_stored(rep_a, ra, &a)))
        return cli_fail(run_missing_hint(rep_a, st));
    if ((st = h5report_read_run_stored(rep_b, rb, &b))) {
        h5store_let_go_source(&a);
        run_record_free(&a);
        return cli_fail(run_missing_hint(rep_b, st));
    }
    a.tensor_limit = b.tensor_limit = budget.bytes / 2;
    struct checked_objects checked = {0};
    a.checked = b.checked = &checked;
    int code = diff_runs(fa, &a, fb, &b, o);
    h5store_let_go_source(&a);
    h5store_let_go_source(&b);
    run_record_free(&a);
    run_record_free(&b);
    checked_objects_free(&checked);
    return code;
}

static const char diff_usage[] = "usage: ckpt-verify diff [-t|--tolerance ULP] [-j|--json] A.h5[:run] B.h5[:run]\n";

int cli_diff(int argc, char **argv)
{
    cli_keep_freed_memory();
    struct diff_options o = {0, 0};
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"tolerance", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    char *end;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":jt:h", options, NULL)) != -1) {
        switch (opt) {
        case 'j': o.json = 1; break;
        case 't':
            o.tolerance = strtod(optarg, &end);
            if (*end || !*optarg || !(o.tolerance >= 0) || isinf(o.tolerance)) {
                fprintf(stderr, "ckpt-verify diff: --tolerance: '%s' is not a number of ULP >= 0\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            printf("%s\nCompares two runs of any files that follow the schema (docs/schema.md), tensor by tensor:\n"
                   "bitwise, and the sign-aware ULP distance where bits differ. A run defaults to baseline_0, else\n"
                   "the file's only run. --tolerance ULP accepts differences up to ULP; --json prints one JSON object.\n"
                   "exit codes: 0 identical (or within the tolerance), 1 different, 2 bad input, 3 internal error\n",
                   diff_usage);
            return 0;
        default: return cli_option_error("diff", opt, argv[optind - 1], options);
        }
    }
    int first = optind;
    if (argc - first != 2) {
        /* One line on what is wrong: the usage says the rest (--help). */
        if (argc - first == 1)
            fprintf(stderr, "ckpt-verify diff: a second file is missing: diff compares A.h5[:run] with B.h5[:run] "
                            "(A.h5:run_a A.h5:run_b compares two runs of one file)\n");
        else
            fprintf(stderr, "ckpt-verify diff: %d files given, where diff compares two: A.h5[:run] B.h5[:run] "
                            "(see ckpt-verify diff --help)\n", argc - first);
        return EXIT_USAGE;
    }
    argv += first - 1;
    char fa[1024], fb[1024], ra[64], rb[64];
    struct h5report *rep_a = NULL, *rep_b = NULL;
    int st = split_file_run(argv[1], fa, sizeof fa, ra, sizeof ra, NULL, &rep_a);
    if (!st)
        st = split_file_run(argv[2], fb, sizeof fb, rb, sizeof rb, rep_a, &rep_b);
    int code = st ? cli_fail(st) : diff_reports(rep_a, ra, rep_b, rb, &o);
    if (rep_b != rep_a)
        h5report_close(rep_b);
    h5report_close(rep_a);
    return code;
}
