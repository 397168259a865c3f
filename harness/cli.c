/* cli: the ckpt-verify command. Parses flags, loads cases, runs them (or a
 * --shard of them) through the runner, prints the tables and progress,
 * writes summary.json and junit.xml, compares with --compare-to; and the
 * subcommands (`diff` over any two files of the schema, `merge` of run
 * directories, ...). The only place that exits.
 * Exit codes: 0 every verdict expected, 1 an unexpected verdict, a
 * regression or a difference (diff), 2 usage or input error, 3 internal
 * error. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aten/aten.h"
#include "bench.h"
#include "blas_info.h"
#include "aten/torch_runtime.h"
#include "case.h"
#include "compare.h"
#include "error.h"
#include "external.h"
#include "h5store.h"
#include "impl.h"
#include "plugin.h"
#include "judge.h"
#include "mutation_matrix.h"
#include "junit.h"
#include "merge.h"
#include "model.h"
#include "plot.h"
#include "progress.h"
#include "regress.h"
#include "report.h"
#include "runner.h"
#include "shard.h"
#include "summary_file.h"

#define EXIT_UNEXPECTED 1
#define EXIT_USAGE 2
#define EXIT_INTERNAL 3
#define MAX_SELECTED 256
/* The case files' limits for steps and threads (case.c, cases/README.md). */
#define CLI_MAX_STEPS 100000
#define CLI_MAX_THREADS 1024

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ckpt-verify [options]                 run cases (default: the smoke suite)\n"
            "       ckpt-verify diff [--tolerance ULP] [--json] A.h5[:run] B.h5[:run]\n"
            "                                               compare two runs of any schema files\n"
            "       ckpt-verify merge OUT_DIR DIR...        merge run directories (shards) into one report\n"
            "       ckpt-verify judge [--out DIR] FILE.h5... verdicts from the runs stored in report files\n"
            "       ckpt-verify plot RUN_DIR                determinism, memory and time plots (gnuplot)\n"
            "       ckpt-verify bench [--quick] [--out DIR]  memory and time benchmark (see bench --help)\n"
            "\n"
            "Runs each case with and without gradient checkpointing from the same seed, parameters\n"
            "and inputs, records every gradient to HDF5 and compares them bitwise (ULP distance when\n"
            "they differ, against the baseline's own run-to-run noise floor).\n"
            "\n"
            "options:\n"
            "  --case NAME        run this case (repeatable)\n"
            "  --suite LABEL      run every case labelled LABEL (smoke, nightly, ...)\n"
            "  --cases PATH       case file or directory (default: %s)\n"
            "  --list             list the cases and exit\n"
            "  --impl LIST        comma-separated impls instead of each case's own\n"
            "  --out DIR          output directory (default: reports/<UTC timestamp>)\n"
            "  --steps N          training steps per run (overrides the case)\n"
            "  --repeats N        timed steps per run, median taken: the recorded steps, then timing-only\n"
            "                     ones up to N (default: the recorded steps alone)\n"
            "  --seed N           seed (overrides the case)\n"
            "  --threads N        intra-op threads (overrides the case)\n"
            "  --device DEV       cpu or cuda:N (overrides the case)\n"
            "  --verify-values    non-reentrant: check recomputed saved tensors against forward fingerprints\n"
            "                     (determinism_check = values; refused for a case with a reentrant impl)\n"
            "  --shard K/N        run the K-th of N round-robin slices of the selected cases (1 <= K <= N)\n"
            "  --compare-to DIR   list regressions against the run in DIR (its summary.json); any -> exit 1\n"
            "  --progress         off a terminal, one line per finished case on stderr (default: quiet)\n"
            "  --impl-lib PATH.so load checkpoint impls from a plugin (impls/plugin.h); repeatable, before --help\n"
            "  --external CMD     after each case, run CMD REPORT.h5: it appends its own runs (docs/external.md)\n"
            "                     and all runs are judged together; a failing CMD or a malformed run: exit 2\n"
            "  --version          the harness, libtorch and BLAS this process runs with\n"
            "  -h, --help         this text\n"
            "\n"
            "impls:\n",
            CKPT_CASES_DIR);
    for (const struct checkpoint_impl *const *i = impl_all(); *i; i++)
        fprintf(out, "  %-20s %s\n", (*i)->name, (*i)->summary);
    fprintf(out, "\nexit codes: 0 all verdicts expected, 1 an unexpected verdict (diff: a difference),\n"
                 "            2 usage or input error, 3 internal error\n");
    struct blas_info blas;
    blas_info_detect(&blas);
    fprintf(out, "\nBLAS (the library providing sgemm_ in this process): %s\n", blas.name);
}

/* What this process computes with: the harness, the torch it was compiled
 * against and the one it runs with (harness/aten/torch_runtime.h), CUDA,
 * and the BLAS found at run time (harness/report/blas_info.h). */
static void print_version(FILE *out)
{
    struct blas_info blas;
    blas_info_detect(&blas);
    struct torch_runtime rt;
    torch_runtime_read(&rt);
    fprintf(out, "ckpt-verify %s (git %s)\n", CKPT_VERSION, CKPT_GIT_REV);
    fprintf(out, "torch %s (CUDA %s) from %s\n", rt.version, rt.cuda, rt.library);
    fprintf(out, "compiled against torch %s (CUDA %s); pinned torch %s (env/requirements.txt)%s\n",
            torch_compiled_version(), torch_compiled_cuda(), torch_pinned_version(),
            strcmp(rt.version, torch_compiled_version()) ? "; MISMATCH: rebuild" : "");
    if (!aten_built_with_cuda()) {
        fprintf(out, "cuda: not compiled\n");
    } else if (aten_device_count() == 0) {
        fprintf(out, "cuda: compiled (no device)\n");
    } else {
        char name[256];
        fprintf(out, "cuda: compiled, %d device(s): %s (cuda:0)\n", aten_device_count(),
                aten_device_name(0, name, sizeof name));
    }
    fprintf(out, "BLAS %s%s%s\n", blas.name, blas.path[0] ? ": " : "", blas.path);
}

/* Runs and benchmarks compute: a slow BLAS gets its one-line warning, and
 * a terminal gets a header line naming what the run computes with. */
static void announce_blas(FILE *header)
{
    struct blas_info blas;
    blas_info_detect(&blas);
    if (blas_info_warning(&blas))
        fprintf(stderr, "ckpt-verify: %s\n", blas_info_warning(&blas));
    if (header)
        fprintf(header, "ckpt-verify %s (git %s), libtorch %s, BLAS %s\n", CKPT_VERSION, CKPT_GIT_REV,
                aten_libtorch_version(), blas.name);
}

static int fail(int code)
{
    fprintf(stderr, "ckpt-verify: %s\n", error_message());
    return code == ST_INPUT ? EXIT_USAGE : code == ST_OK ? 0 : EXIT_INTERNAL;
}

/* ---- diff ------------------------------------------------------------------ */

/* "file.h5:run" -> file, run (default: baseline_0, else the only run). */
static int split_file_run(const char *arg, char *file, size_t flen, char *run, size_t rlen)
{
    /* An argument that names an existing file is that file, colon or not. */
    struct stat sb;
    const char *colon = stat(arg, &sb) == 0 ? NULL : strrchr(arg, ':');
    if (colon && strstr(colon, ".h5") == NULL) {
        snprintf(file, flen, "%.*s", (int)(colon - arg), arg);
        snprintf(run, rlen, "%s", colon + 1);
        return ST_OK;
    }
    snprintf(file, flen, "%s", arg);
    char (*names)[64] = NULL;
    int count = 0;
    int st = h5store_list_runs(file, &names, &count);
    if (st)
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
static int run_missing_hint(const char *file, int st)
{
    const char *msg = error_message();
    size_t n = strlen(msg);
    char (*names)[64] = NULL;
    int count = 0;
    if (st != ST_INPUT || n < 11 || strcmp(msg + n - 11, "run missing") != 0)
        return st;
    char text[1024];
    snprintf(text, sizeof text, "%s", msg);
    if (h5store_list_runs(file, &names, &count) || count == 0) {
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
static void print_tensor_diff(const struct run_tensor *ta, const struct run_tensor *tb, const struct tensor_diff *d,
                              struct nonfinite_totals *totals)
{
    char ulp[32], idx[96];
    totals->nan_a += d->nan_a;
    totals->nan_b += d->nan_b;
    totals->inf_a += d->inf_a;
    totals->inf_b += d->inf_b;
    if (d->bitwise_equal) {
        if (d->nan_a || d->inf_a)
            printf("  %-40s identical, including NaN %zu/%zu, Inf %zu/%zu (bit patterns equal)\n", ta->path,
                   d->nan_a, d->nan_b, d->inf_a, d->inf_b);
        return;
    }
    host_tensor_index_str(&ta->t, d->first_index, idx, sizeof idx);
    printf("  %-40s %zu of %zu differ; first at %s (%.9g vs %.9g", ta->path, d->n_differ, d->count, idx, d->first_a,
           d->first_b);
    /* Two NaNs print alike; only their bits show the difference. */
    if (isnan(d->first_a) || isnan(d->first_b)) {
        int digits = (int)dtype_size(ta->t.dtype) * 2;
        printf("; bits 0x%0*llx vs 0x%0*llx", digits, element_bits(&ta->t, d->first_index), digits,
               element_bits(&tb->t, d->first_index));
    }
    printf("); max ULP %s; max abs %.3g; NaN %zu/%zu, Inf %zu/%zu\n", ulp_format(d->max_ulp, ulp, sizeof ulp),
           d->max_abs, d->nan_a, d->nan_b, d->inf_a, d->inf_b);
}

struct diff_options {
    double tolerance; /* ULP: differences up to this are reported but not a difference (exit 0) */
    int json;         /* one JSON object on stdout instead of the text */
};

/* One tensor pair as JSON: what the text line says, field by field. */
static json_t *tensor_diff_json(const struct run_tensor *ta, const struct tensor_diff *d, const char *status)
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
        json_object_set_new(o, "max_ulp", d->max_ulp == ULP_INFINITE ? json_null() : json_integer((json_int_t)d->max_ulp));
        json_object_set_new(o, "max_abs", json_real(d->max_abs));
    }
    json_object_set_new(o, "nan_a", json_integer((json_int_t)d->nan_a));
    json_object_set_new(o, "nan_b", json_integer((json_int_t)d->nan_b));
    json_object_set_new(o, "inf_a", json_integer((json_int_t)d->inf_a));
    json_object_set_new(o, "inf_b", json_integer((json_int_t)d->inf_b));
    return o;
}

static int diff_runs(const char *fa, const struct run_record *a, const char *fb, const struct run_record *b,
                     const struct diff_options *o)
{
    int st;
    if ((st = h5store_check_run(fa, a)) || (st = h5store_check_run(fb, b)) ||
        (st = check_comparable(fa, a, fb, b)))
        return fail(st);
    json_t *tensors = o->json ? json_array() : NULL;
    if (!o->json)
        printf("diff %s:%s vs %s:%s (bitwise; ULP distance, sign-aware, where bits differ%s)\n", fa, a->name, fb,
               b->name, o->tolerance > 0 ? "; tolerance given" : "");
    int differ = 0, beyond = 0, compared = 0, missing = 0;
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
                printf("  %-40s only in A\n", ta->path);
            missing++;
            continue;
        }
        struct tensor_diff d;
        if ((st = compare_tensors(&ta->t, &tb->t, &d))) {
            json_decref(tensors);
            return fail(st);
        }
        compared++;
        differ += !d.bitwise_equal;
        int within = !d.bitwise_equal && d.max_ulp != ULP_INFINITE && (double)d.max_ulp <= o->tolerance;
        beyond += !d.bitwise_equal && !within;
        if (o->json)
            json_array_append_new(tensors, tensor_diff_json(ta, &d, d.bitwise_equal ? "identical"
                                                                    : within         ? "within_tolerance"
                                                                                     : "differs"));
        else
            print_tensor_diff(ta, tb, &d, &totals);
    }
    for (int i = 0; i < b->n; i++)
        if (diff_in_scope(b->items[i].path) && !run_record_find(a, b->items[i].path)) {
            if (o->json)
                json_array_append_new(tensors,
                                      json_pack("{s:s, s:s}", "path", b->items[i].path, "status", "only_in_b"));
            else
                printf("  %-40s only in B\n", b->items[i].path);
            missing++;
        }
    const char *result = beyond || missing ? "different" : differ ? "within_tolerance" : "identical";
    if (o->json) {
        json_t *out = json_pack("{s:{s:s, s:s}, s:{s:s, s:s}, s:s, s:f, s:o, s:{s:i, s:i, s:i, s:i, s:s}}", "a",
                                "file", fa, "run", a->name, "b", "file", fb, "run", b->name, "compared",
                                "bitwise; sign-aware ULP distance where bits differ", "tolerance_ulp", o->tolerance,
                                "tensors", tensors, "summary", "compared", compared, "differ", differ,
                                "beyond_tolerance", beyond, "missing", missing, "result", result);
        if (!out || json_dumpf(out, stdout, JSON_INDENT(2)) != 0) {
            json_decref(out);
            return fail(error_set(ST_INTERNAL, "diff: cannot write JSON"));
        }
        printf("\n");
        json_decref(out);
    } else {
        printf("%d tensors compared: %d differ", compared, differ);
        if (o->tolerance > 0)
            printf(" (%d beyond %g ULP)", beyond, o->tolerance);
        printf(", %d missing on one side", missing);
        if (totals.nan_a || totals.nan_b || totals.inf_a || totals.inf_b)
            printf("; NaN %zu/%zu, Inf %zu/%zu", totals.nan_a, totals.nan_b, totals.inf_a, totals.inf_b);
        printf(" -> %s\n", beyond || missing ? "DIFFERENT"
                           : differ          ? "within the tolerance"
                                             : "bitwise identical");
    }
    return beyond || missing ? EXIT_UNEXPECTED : 0;
}

/* What the runs read from files may load in all: CKPT_MEMORY_LIMIT when it
 * is set, else H5STORE_READ_LIMIT or the machine's memory, whichever is
 * less (a small file can declare huge or hard-linked datasets). */
static int read_budget(uint64_t *budget)
{
    int64_t memory = ckpt_counting_allocator_limit();
    if (memory < 0)
        return error_set(ST_INPUT, "CKPT_MEMORY_LIMIT='%s': not a byte count (for example 512M or 8G)",
                         getenv("CKPT_MEMORY_LIMIT"));
    *budget = getenv("CKPT_MEMORY_LIMIT") || (uint64_t)memory < H5STORE_READ_LIMIT ? (uint64_t)memory
                                                                                  : H5STORE_READ_LIMIT;
    return ST_OK;
}

static int cmd_diff(int argc, char **argv)
{
    struct diff_options o = {0, 0};
    int first = 1;
    for (; first < argc && argv[first][0] == '-' && argv[first][1] == '-'; first++) {
        char *end;
        if (!strcmp(argv[first], "--json")) {
            o.json = 1;
        } else if (!strcmp(argv[first], "--tolerance") && first + 1 < argc) {
            o.tolerance = strtod(argv[++first], &end);
            if (*end || !*argv[first] || !(o.tolerance >= 0) || isinf(o.tolerance)) {
                fprintf(stderr, "ckpt-verify diff: --tolerance: '%s' is not a number of ULP >= 0\n", argv[first]);
                return EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "ckpt-verify diff: unknown option '%s' (usage: ckpt-verify diff [--tolerance ULP] "
                            "[--json] A.h5[:run] B.h5[:run])\n", argv[first]);
            return EXIT_USAGE;
        }
    }
    if (argc - first != 2) {
        fprintf(stderr, "usage: ckpt-verify diff [--tolerance ULP] [--json] A.h5[:run] B.h5[:run]\n");
        return EXIT_USAGE;
    }
    argv += first - 1;
    char fa[1024], fb[1024], ra[64], rb[64];
    struct run_record a, b;
    int st;
    if ((st = split_file_run(argv[1], fa, sizeof fa, ra, sizeof ra)) ||
        (st = split_file_run(argv[2], fb, sizeof fb, rb, sizeof rb)))
        return fail(st);
    uint64_t budget;
    if ((st = read_budget(&budget)))
        return fail(st);
    if ((st = h5store_read_run_within(fa, ra, &budget, &a)))
        return fail(run_missing_hint(fa, st));
    if ((st = h5store_read_run_within(fb, rb, &budget, &b))) {
        run_record_free(&a);
        return fail(run_missing_hint(fb, st));
    }
    int code = diff_runs(fa, &a, fb, &b, &o);
    run_record_free(&a);
    run_record_free(&b);
    return code;
}

/* ---- running cases ------------------------------------------------------------ */

struct overrides {
    const char *impls, *device;
    int steps, threads, verify_values, has_seed, repeats;
    unsigned long long seed;
};

/* --impl LIST: comma-separated, each impl known and named once. An empty
 * list or entry would run a case with fewer impls than asked for, and a
 * repeated one would write one run over the other. */
static int parse_impl_list(const char *list, char (*out)[CASE_WORD_MAX], int *count)
{
    *count = 0;
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        char word[CASE_WORD_MAX];
        size_t start = 0;
        while (start < n && p[start] == ' ')
            start++;
        while (n > start && p[n - 1] == ' ')
            n--;
        if (n == start)
            return error_set(ST_INPUT, "--impl: empty impl name in '%s' (see --help)", list);
        if (n - start >= sizeof word)
            return error_set(ST_INPUT, "--impl: impl name '%.*s' is too long", (int)(n - start), p + start);
        snprintf(word, sizeof word, "%.*s", (int)(n - start), p + start);
        if (!impl_find(word))
            return error_set(ST_INPUT, "--impl: unknown impl '%s' (see --help)", word);
        for (int k = 0; k < *count; k++)
            if (strcmp(out[k], word) == 0)
                return error_set(ST_INPUT, "--impl: impl '%s' named twice", word);
        if (*count == CASE_MAX_IMPLS)
            return error_set(ST_INPUT, "--impl: more than %d impls", CASE_MAX_IMPLS);
        snprintf(out[(*count)++], CASE_WORD_MAX, "%s", word);
        p += strcspn(p, ",");
        if (!*p)
            return ST_OK;
        p++;
    }
}

static int apply_overrides(struct ckpt_case *c, const struct overrides *o)
{
    if (o->steps > 0)
        c->steps = o->steps;
    if (o->threads > 0)
        c->threads = o->threads;
    if (o->has_seed)
        c->seed = o->seed;
    if (o->device)
        snprintf(c->device, sizeof c->device, "%s", o->device);
    if (o->verify_values)
        c->determinism_check = DETERMINISM_VALUES;
    if (o->impls)
        return parse_impl_list(o->impls, c->impls, &c->n_impls);
    return ST_OK;
}

/* The longest --out accepted: a report's path, "<out>/<case>.h5", must fit
 * the 1024 bytes a case result keeps (judge.h), with the longest case name. */
#define OUT_DIR_MAX (1024 - CASE_NAME_MAX - 8)

/* An output directory is refused before any work when it cannot be one:
 * too long to keep whole, or an existing non-directory. */
static int check_out_dir(const char *path)
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

static int make_dirs(const char *path)
{
    char buf[1024];
    int st = check_out_dir(path);
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

/* Every impl and device the selected cases name must exist before anything
 * runs: a typo in the last case of a suite should not cost the runs before
 * it, and a CPU build refuses a GPU case in one line. */
static int check_impls(const struct ckpt_case *const *run, int n_run, const struct overrides *o)
{
    for (int i = 0; i < n_run; i++) {
        struct ckpt_case c = *run[i];
        int st = apply_overrides(&c, o);
        if (st)
            return st;
        for (int k = 0; k < c.n_impls; k++)
            if (!impl_find(c.impls[k]))
                return error_set(ST_INPUT, "%s:%d: case %s: unknown impl '%s' (see --help)", c.file, c.line,
                                 c.name, c.impls[k]);
            else if (c.determinism_check == DETERMINISM_VALUES && impl_is_reentrant(impl_find(c.impls[k])))
                return error_set(ST_INPUT, "%s:%d: case %s: impl %s is reentrant: it keeps no saved tensors to "
                                 "compare, so %s is not supported (name the non-reentrant impls with --impl)",
                                 c.file, c.line, c.name, c.impls[k],
                                 o->verify_values ? "--verify-values" : "determinism_check = values");
            else if ((c.backward == BACKWARD_GRAD || c.backward == BACKWARD_INPUTS) &&
                     impl_is_reentrant(impl_find(c.impls[k])))
                return error_set(ST_INPUT, "%s:%d: case %s: backward = %s: impl %s is reentrant, and reentrant "
                                 "checkpointing is not compatible with grad() or backward(inputs=...) (use loss or "
                                 "twice, or name the non-reentrant impls with --impl)",
                                 c.file, c.line, c.name, c.backward == BACKWARD_GRAD ? "grad" : "inputs", c.impls[k]);
        if ((st = model_check_devices(&c)))
            return st;
    }
    return ST_OK;
}

static int cmd_merge(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt-verify merge OUT_DIR DIR...\n");
        return EXIT_USAGE;
    }
    int st, unexpected = 0;
    /* The output would overwrite that input's summary.json with the merge. */
    struct stat out_sb, in_sb;
    if (stat(argv[1], &out_sb) == 0)
        for (int i = 2; i < argc; i++)
            if (stat(argv[i], &in_sb) == 0 && in_sb.st_dev == out_sb.st_dev && in_sb.st_ino == out_sb.st_ino) {
                fprintf(stderr, "ckpt-verify: merge: output directory %s is also an input (%s)\n", argv[1], argv[i]);
                return EXIT_USAGE;
            }
    if ((st = make_dirs(argv[1])) ||
        (st = merge_run_dirs(argv[1], (const char *const *)argv + 2, argc - 2, stdout, &unexpected)))
        return fail(st);
    /* The merged report gets the plots a single run would (scripts and
     * gnuplot found as `plot` finds them); missing plots do not change the
     * verdicts, so they only warn. */
    const char *scripts = getenv("CKPT_SCRIPTS_DIR") ? getenv("CKPT_SCRIPTS_DIR") : CKPT_SOURCE_DIR "/scripts";
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    if (plot_run_dir(argv[1], scripts, gnuplot, stdout))
        fprintf(stderr, "ckpt-verify: warning: merged report has no plots: %s\n", error_message());
    return unexpected ? EXIT_UNEXPECTED : 0;
}

/* plot RUN_DIR: the scripts come from CKPT_SCRIPTS_DIR, else the source
 * tree's scripts/; gnuplot from CKPT_GNUPLOT, else PATH. */
static int cmd_plot(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: ckpt-verify plot RUN_DIR   (RUN_DIR holds summary.json; plots go to RUN_DIR/plots)\n");
        return argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : EXIT_USAGE;
    }
    const char *scripts = getenv("CKPT_SCRIPTS_DIR") ? getenv("CKPT_SCRIPTS_DIR") : CKPT_SOURCE_DIR "/scripts";
    const char *gnuplot = getenv("CKPT_GNUPLOT") ? getenv("CKPT_GNUPLOT") : "gnuplot";
    /* A FIFO in the summary's place would block the plot for ever. */
    char summary[1100];
    struct stat sb;
    snprintf(summary, sizeof summary, "%s/summary.json", argv[1]);
    int st = stat(summary, &sb) == 0 && !S_ISREG(sb.st_mode)
                 ? error_set(ST_INPUT, "%s: not a regular file, not a summary", summary)
                 : plot_run_dir(argv[1], scripts, gnuplot, stdout);
    return st ? fail(st) : 0;
}

/* judge [--out DIR] FILE.h5...: verdicts from the runs stored in reports,
 * whoever wrote them. Every file is judged before anything is written, so a
 * bad file (exit 2) leaves --out untouched. */
static int cmd_judge(int argc, char **argv)
{
    const char *out_dir = NULL;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "-h") || !strcmp(argv[first], "--help")) {
            printf("usage: ckpt-verify judge [--out DIR] [--impl-lib PATH.so] FILE.h5...\n"
                   "Judges every run of each file against its baseline_* runs (per-tensor noise envelope at the\n"
                   "tensor's scale, NOISE within %gx); expectations from the file's /case expect attribute,\n"
                   "otherwise PASS or NOISE. --out DIR writes summary.json and junit.xml there.\n"
                   "exit codes: 0 all verdicts expected, 1 an unexpected verdict, 2 bad input, 3 internal error\n",
                   JUDGE_NOISE_MARGIN);
            return 0;
        }
        if (!strcmp(argv[first], "--out") && first + 1 < argc) {
            out_dir = argv[++first];
            continue;
        }
        /* A plugin's planted impls are expected to FAIL, as in the run. */
        if (!strcmp(argv[first], "--impl-lib") && first + 1 < argc) {
            if (impl_load_plugin(argv[++first]))
                return fail(ST_INPUT);
            continue;
        }
        if (!strcmp(argv[first], "--")) {
            first++;
            break;
        }
        fprintf(stderr, "ckpt-verify judge: unknown option '%s' (see judge --help)\n", argv[first]);
        return EXIT_USAGE;
    }
    int n = argc - first;
    if (n < 1) {
        fprintf(stderr, "usage: ckpt-verify judge [--out DIR] FILE.h5...\n");
        return EXIT_USAGE;
    }
    if (out_dir && check_out_dir(out_dir))
        return fail(ST_INPUT);
    struct case_result *results = calloc((size_t)n, sizeof *results);
    if (!results)
        return fail(error_set(ST_INTERNAL, "out of memory"));
    int st = ST_OK, bad = 0, unexpected = 0;
    uint64_t budget;
    if ((st = read_budget(&budget))) {
        free(results);
        return fail(st);
    }
    for (int i = 0; i < n; i++) {
        /* Each file gets the whole budget: its runs are freed once judged. */
        uint64_t file_budget = budget;
        if ((st = judge_file(argv[first + i], &file_budget, &results[i]))) {
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            if (st != ST_INPUT)
                break;
            bad = 1;
            st = ST_OK;
        }
    }
    if (bad || st) {
        free(results);
        return st ? EXIT_INTERNAL : EXIT_USAGE;
    }
    struct summary *summary = NULL;
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION)) ||
        (st = summary_set_run(summary, "judge", 1, 1))) {
        summary_free(summary);
        free(results);
        return fail(st);
    }
    for (int i = 0; i < n && !st; i++) {
        report_print_case(stdout, &results[i]);
        for (int k = 0; k < results[i].n_results; k++)
            unexpected += !results[i].results[k].expected;
        st = summary_add_case_run(summary, &results[i], i, NAN);
    }
    if (!st && out_dir &&
        ((st = make_dirs(out_dir)) || (st = summary_write(summary, out_dir)) ||
         (st = junit_write(summary_json(summary), out_dir, NULL)))) {
        summary_free(summary);
        free(results);
        return fail(st);
    }
    if (!st) {
        mutation_matrix_print(stdout, summary_json(summary));
        printf("%d file(s) judged; %s%s%s\n", n,
               unexpected ? "UNEXPECTED verdicts (see NO above)" : "all verdicts as expected",
               out_dir ? "; report in " : "", out_dir ? out_dir : "");
    }
    summary_free(summary);
    free(results);
    if (st)
        return fail(st);
    return unexpected ? EXIT_UNEXPECTED : 0;
}

static int cmd_bench(int argc, char **argv)
{
    struct bench_options o;
    int help, met, st;
    if ((st = bench_parse_args(argc, argv, &o, &help)))
        return fail(st);
    if (help) {
        bench_usage(stdout);
        return 0;
    }
    char default_out[256];
    if (!o.out_dir) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(default_out, sizeof default_out, "reports/bench-%Y%m%d-%H%M%S", &tm);
        o.out_dir = default_out;
    }
    if ((st = make_dirs(o.out_dir)) || (st = aten_init()))
        return fail(st);
    announce_blas(NULL); /* bench's own header names the BLAS */
    if ((st = bench_run(&o, stdout, &met)))
        return fail(st);
    return met ? 0 : EXIT_UNEXPECTED;
}

int main(int argc, char **argv)
{
    /* Past a file size limit (ulimit -f) a write fails with EFBIG and is
     * reported like a full disk, instead of the signal killing the run. */
    signal(SIGXFSZ, SIG_IGN);
    /* A binary run against another libtorch than it was compiled for is
     * refused before anything is read or written; --version still reports. */
    int asks_version = 0;
    for (int i = 1; i < argc; i++)
        asks_version |= strcmp(argv[i], "--version") == 0;
    int st_torch = asks_version ? ST_OK : torch_runtime_check();
    if (st_torch != ST_OK)
        return fail(st_torch);
    if (argc > 1 && strcmp(argv[1], "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "plot") == 0)
        return cmd_plot(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "merge") == 0)
        return cmd_merge(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "judge") == 0)
        return cmd_judge(argc - 1, argv + 1);

    const char *cases_path = getenv("CKPT_CASES") ? getenv("CKPT_CASES") : CKPT_CASES_DIR;
    const char *out_dir = NULL, *suite = NULL, *selected[MAX_SELECTED], *compare_to = NULL, *external = NULL;
    int progress_lines = 0;
    struct shard shard = {1, 1};
    int n_selected = 0, list = 0;
    struct overrides o = {0};
    enum { OPT_CASES = 256, OPT_IMPL, OPT_OUT, OPT_STEPS, OPT_SEED, OPT_THREADS, OPT_DEVICE, OPT_VERIFY, OPT_SUITE,
           OPT_SHARD, OPT_COMPARE, OPT_PROGRESS, OPT_EXTERNAL, OPT_IMPL_LIB, OPT_VERSION,
           OPT_REPEATS };
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},        {"cases", required_argument, NULL, OPT_CASES},
        {"list", no_argument, NULL, 'l'},              {"impl", required_argument, NULL, OPT_IMPL},
        {"out", required_argument, NULL, OPT_OUT},     {"steps", required_argument, NULL, OPT_STEPS},
        {"seed", required_argument, NULL, OPT_SEED},   {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE}, {"verify-values", no_argument, NULL, OPT_VERIFY},
        {"suite", required_argument, NULL, OPT_SUITE}, {"help", no_argument, NULL, 'h'},
        {"shard", required_argument, NULL, OPT_SHARD}, {"compare-to", required_argument, NULL, OPT_COMPARE},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"external", required_argument, NULL, OPT_EXTERNAL},
        {"impl-lib", required_argument, NULL, OPT_IMPL_LIB},
        {"version", no_argument, NULL, OPT_VERSION},
        {"repeats", required_argument, NULL, OPT_REPEATS},
        {NULL, 0, NULL, 0},
    };
    int opt;
    char *end;
    opterr = 0; /* one line of our own instead of getopt's and the usage text */
    while ((opt = getopt_long(argc, argv, ":c:lh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if (n_selected == MAX_SELECTED) {
                fprintf(stderr, "ckpt-verify: more than %d --case flags\n", MAX_SELECTED);
                return EXIT_USAGE;
            }
            selected[n_selected++] = optarg;
            break;
        case OPT_CASES: cases_path = optarg; break;
        case 'l': list = 1; break;
        case OPT_IMPL: o.impls = optarg; break;
        case OPT_OUT: out_dir = optarg; break;
        case OPT_SUITE: suite = optarg; break;
        case OPT_DEVICE: o.device = optarg; break;
        case OPT_VERIFY: o.verify_values = 1; break;
        case OPT_COMPARE: compare_to = optarg; break;
        case OPT_PROGRESS: progress_lines = 1; break;
        case OPT_IMPL_LIB:
            if (impl_load_plugin(optarg))
                return fail(ST_INPUT);
            break;
        case OPT_EXTERNAL:
            if (!optarg[0]) {
                fprintf(stderr, "ckpt-verify: --external needs a command\n");
                return EXIT_USAGE;
            }
            external = optarg;
            break;
        case OPT_SHARD:
            if (shard_parse(optarg, &shard))
                return fail(ST_INPUT);
            break;
        case OPT_STEPS:
        case OPT_THREADS:
        case OPT_REPEATS:
        case OPT_SEED: {
            /* The same ranges as the case file keys (cases/README.md); a
             * seed is never negative: strtoull would wrap "-1" to 2^64-1. */
            const char *name = opt == OPT_STEPS ? "steps" : opt == OPT_THREADS ? "threads" : opt == OPT_REPEATS ? "repeats" : "seed";
            unsigned long long max = opt == OPT_STEPS || opt == OPT_REPEATS ? CLI_MAX_STEPS
                                     : opt == OPT_THREADS                   ? CLI_MAX_THREADS
                                                                            : ULLONG_MAX;
            unsigned long long min = opt == OPT_SEED ? 0 : 1;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || *end || !isdigit((unsigned char)optarg[0]) || v < min || v > max) {
                fprintf(stderr, "ckpt-verify: --%s: '%s' is not a valid number: expected an integer %llu..%llu\n", name, optarg, min, max);
                return EXIT_USAGE;
            }
            if (opt == OPT_STEPS)
                o.steps = (int)v;
            else if (opt == OPT_THREADS)
                o.threads = (int)v;
            else if (opt == OPT_REPEATS)
                o.repeats = (int)v;
            else {
                o.seed = v;
                o.has_seed = 1;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        case OPT_VERSION: print_version(stdout); return 0;
        case ':':
            fprintf(stderr, "ckpt-verify: option '%s' needs a value (see --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "ckpt-verify: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ckpt-verify: unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (out_dir && check_out_dir(out_dir))
        return fail(ST_INPUT);
    int device;
    if (o.device && aten_parse_device(o.device, &device)) {
        fprintf(stderr, "ckpt-verify: --device: %s\n", error_message());
        return EXIT_USAGE;
    }
    if (o.impls) {
        char impls[CASE_MAX_IMPLS][CASE_WORD_MAX];
        int n_impls;
        if (parse_impl_list(o.impls, impls, &n_impls))
            return fail(ST_INPUT);
    }

    struct case_list cases = {0};
    int st = case_list_load(&cases, cases_path);
    if (st)
        return fail(st);
    if (list) {
        for (int i = 0; i < cases.count; i++) {
            const struct ckpt_case *c = &cases.items[i];
            printf("%-32s %s:%d  labels:", c->name, c->file, c->line);
            for (int k = 0; k < c->n_labels; k++)
                printf("%s%s", k ? "," : " ", c->labels[k]);
            printf("\n");
        }
        case_list_free(&cases);
        return 0;
    }

    /* Which cases: the named ones, else a suite's, else the smoke suite. */
    const struct ckpt_case **run = calloc((size_t)cases.count + 1, sizeof *run);
    int n_run = 0;
    for (int i = 0; i < n_selected; i++) {
        const struct ckpt_case *c = case_list_find(&cases, selected[i]);
        if (!c) {
            const char *near[3] = {0};
            int n = case_list_suggest(&cases, selected[i], near, 3);
            fprintf(stderr, "ckpt-verify: unknown case '%s'", selected[i]);
            for (int k = 0; k < n; k++)
                fprintf(stderr, "%s%s", k ? ", " : " (did you mean: ", near[k]);
            fprintf(stderr, "%s\n", n ? "?)" : "; see --list");
            free(run);
            case_list_free(&cases);
            return EXIT_USAGE;
        }
        run[n_run++] = c;
    }
    if (!n_selected) {
        const char *label = suite ? suite : "smoke";
        for (int i = 0; i < cases.count; i++)
            if (case_has_label(&cases.items[i], label))
                run[n_run++] = &cases.items[i];
        if (!n_run) {
            fprintf(stderr, "ckpt-verify: no case is labelled '%s' in %s\n", label, cases_path);
            free(run);
            case_list_free(&cases);
            return EXIT_USAGE;
        }
    }

    /* The shard keeps each case's index in the full selection, so merged
     * shards come back in the order one unsharded run would have. */
    int *index_of = calloc((size_t)n_run + 1, sizeof *index_of), n_selected_total = n_run;
    n_run = 0;
    for (int i = 0; index_of && i < n_selected_total; i++)
        if (shard_takes(&shard, i)) {
            index_of[n_run] = i;
            run[n_run++] = run[i];
        }
    /* A bad previous run is found before the suite spends its time. */
    json_t *previous = NULL;
    if (!index_of)
        st = error_set(ST_INTERNAL, "out of memory");
    else if (!(st = check_impls(run, n_run, &o)) && compare_to)
        st = summary_file_load(compare_to, &previous);
    if (st) {
        free(index_of);
        free(run);
        case_list_free(&cases);
        return fail(st);
    }
    if (shard.n > 1)
        printf("shard %d/%d: %d of %d selected case(s)\n", shard.k, shard.n, n_run, n_selected_total);
    char default_out[256];
    if (!out_dir) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(default_out, sizeof default_out, "reports/%Y%m%d-%H%M%S", &tm);
        out_dir = default_out;
    }
    if ((st = make_dirs(out_dir)) || (st = aten_init())) {
        json_decref(previous);
        free(index_of);
        free(run);
        case_list_free(&cases);
        return fail(st);
    }

    announce_blas(isatty(STDOUT_FILENO) ? stdout : NULL);
    struct summary *summary = NULL;
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION)) ||
        (st = summary_set_run(summary, n_selected ? NULL : suite ? suite : "smoke", shard.k, shard.n))) {
        summary_free(summary);
        json_decref(previous);
        free(index_of);
        free(run);
        case_list_free(&cases);
        return fail(st);
    }
    struct run_settings settings = {.out_dir = out_dir, .git_rev = CKPT_GIT_REV, .harness_version = CKPT_VERSION,
                                    .repeats = o.repeats};
    int unexpected = 0, worst = 0;
    struct case_result *result = malloc(sizeof *result);
    struct progress bar;
    progress_init(&bar, stderr,
                  isatty(STDERR_FILENO) ? PROGRESS_TERMINAL : progress_lines ? PROGRESS_LINES : PROGRESS_QUIET, n_run);
    for (int i = 0; i < n_run && result; i++) {
        struct ckpt_case c = *run[i];
        progress_case_start(&bar, i, c.name);
        double started = progress_now();
        if ((st = apply_overrides(&c, &o))) {
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        st = runner_run_case(&c, &settings, result);
        if (!st && external && result->h5_path[0]) {
            /* Another producer's runs, judged with the harness's. */
            struct case_result *with_external = malloc(sizeof *with_external);
            if (!with_external)
                st = error_set(ST_INTERNAL, "out of memory");
            else if (!(st = external_append_runs(external, result->h5_path, with_external)))
                *result = *with_external;
            free(with_external);
        }
        progress_case_done(&bar, i, result, progress_now() - started);
        if (st == ST_INPUT) {
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        report_print_case(stdout, result);
        fflush(stdout);
        summary_add_case_run(summary, result, index_of[i], progress_now() - started);
        /* A case that could not run, or whose report could not be written
         * (a full disk), is unexpected whatever its verdicts say. */
        if (st)
            unexpected++;
        for (int k = 0; k < result->n_results; k++)
            unexpected += !result->results[k].expected;
    }
    if (!result)
        worst = EXIT_INTERNAL;
    int wrote_summary = 1;
    if (worst) {
        /* An input error stopped the run: no summary claims the cases it
         * did not get to, and a previous summary in out_dir stays. */
        st = ST_OK;
    } else {
        /* A summary that cannot be written (a full disk) leaves the
         * previous one whole and, like a report that cannot be, exit 1. */
        if ((st = summary_write(summary, out_dir)) || (st = junit_write(summary_json(summary), out_dir, NULL))) {
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            unexpected++;
            st = ST_OK;
            wrote_summary = 0;
        }
        mutation_matrix_print(stdout, summary_json(summary));
        printf("%d case(s); %s; report in %s\n", n_run,
               unexpected ? "UNEXPECTED verdicts (see NO above)" : "all verdicts as expected", out_dir);
    }
    struct regress_counts regressions = {0};
    if (previous && !st && !worst && wrote_summary) {
        struct regress_options ro;
        regress_default_options(&ro);
        if ((st = regress_compare(previous, summary_json(summary), compare_to, &ro, stdout, &regressions)))
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
    }
    json_decref(previous);
    free(index_of);
    free(result);
    summary_free(summary);
    free(run);
    case_list_free(&cases);
    if (worst)
        return worst;
    if (st)
        return EXIT_INTERNAL;
    return unexpected || regressions.regressions ? EXIT_UNEXPECTED : 0;
}
