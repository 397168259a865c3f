/* cli: the ckpt-verify command. Parses flags, loads cases, runs them through
 * the runner, prints the tables, writes summary.json; and the `diff`
 * subcommand over any two files of the schema. The only place that exits.
 * Exit codes: 0 every verdict expected, 1 an unexpected verdict or a
 * difference (diff), 2 usage or input error, 3 internal error. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aten/aten.h"
#include "case.h"
#include "compare.h"
#include "error.h"
#include "h5store.h"
#include "impl.h"
#include "report.h"
#include "runner.h"

#define EXIT_UNEXPECTED 1
#define EXIT_USAGE 2
#define EXIT_INTERNAL 3
#define MAX_SELECTED 256

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ckpt-verify [options]                 run cases (default: the smoke suite)\n"
            "       ckpt-verify diff A.h5[:run] B.h5[:run] compare two runs of any schema files\n"
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
            "  --seed N           seed (overrides the case)\n"
            "  --threads N        intra-op threads (overrides the case)\n"
            "  --device DEV       cpu or cuda:N (overrides the case)\n"
            "  --verify-values    non-reentrant: check recomputed saved tensors against forward fingerprints\n"
            "  -h, --help         this text\n"
            "\n"
            "impls:\n",
            CKPT_CASES_DIR);
    for (const struct checkpoint_impl *const *i = impl_all(); *i; i++)
        fprintf(out, "  %-20s %s\n", (*i)->name, (*i)->summary);
    fprintf(out, "\nexit codes: 0 all verdicts expected, 1 an unexpected verdict (diff: a difference),\n"
                 "            2 usage or input error, 3 internal error\n");
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
    const char *colon = strrchr(arg, ':');
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

static int cmd_diff(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ckpt-verify diff A.h5[:run] B.h5[:run]\n");
        return EXIT_USAGE;
    }
    char fa[1024], fb[1024], ra[64], rb[64];
    struct run_record a, b;
    int st;
    if ((st = split_file_run(argv[1], fa, sizeof fa, ra, sizeof ra)) ||
        (st = split_file_run(argv[2], fb, sizeof fb, rb, sizeof rb)))
        return fail(st);
    if ((st = h5store_read_run(fa, ra, &a)))
        return fail(st);
    if ((st = h5store_read_run(fb, rb, &b))) {
        run_record_free(&a);
        return fail(st);
    }
    printf("diff %s:%s vs %s:%s (bitwise; ULP distance, sign-aware, where bits differ)\n", fa, ra, fb, rb);
    int differ = 0, compared = 0, missing = 0;
    for (int i = 0; i < a.n; i++) {
        const struct run_tensor *ta = &a.items[i];
        if (strncmp(ta->path, "steps/", 6) != 0 && strncmp(ta->path, "final_params/", 13) != 0)
            continue;
        const struct run_tensor *tb = run_record_find(&b, ta->path);
        if (!tb) {
            printf("  %-40s only in A\n", ta->path);
            missing++;
            continue;
        }
        struct tensor_diff d;
        if ((st = compare_tensors(&ta->t, &tb->t, &d)))
            break;
        compared++;
        if (!d.comparable) {
            printf("  %-40s not comparable: %s\n", ta->path, d.why);
            differ++;
        } else if (!d.bitwise_equal) {
            char idx[96];
            host_tensor_index_str(&ta->t, d.first_index, idx, sizeof idx);
            printf("  %-40s %zu of %zu differ; first at %s (%.9g vs %.9g); max ULP %s%llu; max abs %.3g; NaN %zu/%zu, "
                   "Inf %zu/%zu\n",
                   ta->path, d.n_differ, d.count, idx, d.first_a, d.first_b, d.max_ulp == ULP_INFINITE ? "inf " : "",
                   d.max_ulp == ULP_INFINITE ? 0ULL : (unsigned long long)d.max_ulp, d.max_abs, d.nan_a, d.nan_b,
                   d.inf_a, d.inf_b);
            differ++;
        }
    }
    for (int i = 0; i < b.n && !st; i++)
        if ((!strncmp(b.items[i].path, "steps/", 6) || !strncmp(b.items[i].path, "final_params/", 13)) &&
            !run_record_find(&a, b.items[i].path)) {
            printf("  %-40s only in B\n", b.items[i].path);
            missing++;
        }
    run_record_free(&a);
    run_record_free(&b);
    if (st)
        return fail(st);
    printf("%d tensors compared: %d differ, %d missing on one side -> %s\n", compared, differ, missing,
           differ || missing ? "DIFFERENT" : "bitwise identical");
    return differ || missing ? EXIT_UNEXPECTED : 0;
}

/* ---- running cases ------------------------------------------------------------ */

struct overrides {
    const char *impls, *device;
    int steps, threads, verify_values, has_seed;
    unsigned long long seed;
};

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
        c->verify_values = 1;
    if (o->impls) {
        char list[512];
        snprintf(list, sizeof list, "%s", o->impls);
        c->n_impls = 0;
        for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            if (!impl_find(tok))
                return error_set(ST_INPUT, "--impl: unknown impl '%s' (see --help)", tok);
            if (c->n_impls == CASE_MAX_IMPLS)
                return error_set(ST_INPUT, "--impl: more than %d impls", CASE_MAX_IMPLS);
            snprintf(c->impls[c->n_impls++], CASE_WORD_MAX, "%s", tok);
        }
    }
    return ST_OK;
}

static int make_dirs(const char *path)
{
    char buf[1024];
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

static void progress(int done, int total, const char *name)
{
    if (!isatty(STDERR_FILENO))
        return;
    if (name)
        fprintf(stderr, "\r\033[K[%d/%d] %s", done + 1, total, name);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);

    const char *cases_path = getenv("CKPT_CASES") ? getenv("CKPT_CASES") : CKPT_CASES_DIR;
    const char *out_dir = NULL, *suite = NULL, *selected[MAX_SELECTED];
    int n_selected = 0, list = 0;
    struct overrides o = {0};
    enum { OPT_CASES = 256, OPT_IMPL, OPT_OUT, OPT_STEPS, OPT_SEED, OPT_THREADS, OPT_DEVICE, OPT_VERIFY, OPT_SUITE };
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},        {"cases", required_argument, NULL, OPT_CASES},
        {"list", no_argument, NULL, 'l'},              {"impl", required_argument, NULL, OPT_IMPL},
        {"out", required_argument, NULL, OPT_OUT},     {"steps", required_argument, NULL, OPT_STEPS},
        {"seed", required_argument, NULL, OPT_SEED},   {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE}, {"verify-values", no_argument, NULL, OPT_VERIFY},
        {"suite", required_argument, NULL, OPT_SUITE}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    char *end;
    while ((opt = getopt_long(argc, argv, "c:lh", options, NULL)) != -1) {
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
        case OPT_STEPS:
        case OPT_THREADS:
        case OPT_SEED: {
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || *end || !*optarg || (opt != OPT_SEED && (v < 1 || v > 100000))) {
                fprintf(stderr, "ckpt-verify: --%s: '%s' is not a valid number\n",
                        opt == OPT_STEPS ? "steps" : opt == OPT_THREADS ? "threads" : "seed", optarg);
                return EXIT_USAGE;
            }
            if (opt == OPT_STEPS)
                o.steps = (int)v;
            else if (opt == OPT_THREADS)
                o.threads = (int)v;
            else {
                o.seed = v;
                o.has_seed = 1;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ckpt-verify: unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_USAGE;
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

    char default_out[256];
    if (!out_dir) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(default_out, sizeof default_out, "reports/%Y%m%d-%H%M%S", &tm);
        out_dir = default_out;
    }
    if ((st = make_dirs(out_dir)) || (st = aten_init())) {
        free(run);
        case_list_free(&cases);
        return fail(st);
    }

    struct summary *summary = NULL;
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION))) {
        free(run);
        case_list_free(&cases);
        return fail(st);
    }
    struct run_settings settings = {out_dir, CKPT_GIT_REV, CKPT_VERSION};
    int unexpected = 0, worst = 0;
    struct case_result *result = malloc(sizeof *result);
    for (int i = 0; i < n_run && result; i++) {
        struct ckpt_case c = *run[i];
        progress(i, n_run, c.name);
        if ((st = apply_overrides(&c, &o))) {
            progress(0, 0, NULL);
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        st = runner_run_case(&c, &settings, result);
        progress(0, 0, NULL);
        if (st == ST_INPUT) {
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        report_print_case(stdout, result);
        fflush(stdout);
        summary_add_case(summary, result);
        if (st && result->n_results == 0)
            unexpected++;
        for (int k = 0; k < result->n_results; k++)
            unexpected += !result->results[k].expected;
    }
    if (!result)
        worst = EXIT_INTERNAL;
    if ((st = summary_write(summary, out_dir)))
        fprintf(stderr, "ckpt-verify: %s\n", error_message());
    printf("%d case(s); %s; report in %s\n", n_run,
           unexpected ? "UNEXPECTED verdicts (see NO above)" : "all verdicts as expected", out_dir);
    free(result);
    summary_free(summary);
    free(run);
    case_list_free(&cases);
    if (worst)
        return worst;
    if (st)
        return EXIT_INTERNAL;
    return unexpected ? EXIT_UNEXPECTED : 0;
}
