/* run: the main ckpt-verify run. Parses flags, loads cases, runs them (or a
 * --shard of them) through the runner, prints the tables and progress,
 * writes summary.json, junit.xml and report.html, compares with --compare-to. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aten/aten.h"
#include "aten/torch_runtime.h"
#include "case.h"
#include "case_fit.h"
#include "case_text.h"
#include "cli.h"
#include "error.h"
#include "external.h"
#include "impl.h"
#include "plugin.h"
#include "judge.h"
#include "junit.h"
#include "model.h"
#include "mutation_matrix.h"
#include "progress.h"
#include "regress.h"
#include "report.h"
#include "runner.h"
#include "shard.h"
#include "stale_reports.h"
#include "summary_file.h"

#define MAX_SELECTED 256
/* The case files' limits for steps and threads (case_keys.c, cases/README.md). */
#define CLI_MAX_STEPS 100000
#define CLI_MAX_THREADS 1024

struct overrides {
    const char *impls, *device;
    int steps, threads, verify_values, has_seed, repeats;
    unsigned long long seed;
};

static const char *impl_name_at(const void *ctx, int i)
{
    return ((const struct checkpoint_impl *const *)ctx)[i]->name;
}

/* An unknown impl, with the known ones nearest to it, as --case does. */
static int unknown_impl(const char *where, const char *word)
{
    const struct checkpoint_impl *const *all = impl_all();
    const char *near[3];
    char hint[256];
    int count = 0;
    while (all[count])
        count++;
    int n = text_suggest(word, impl_name_at, all, count, near, 3);
    text_format_suggestions(hint, sizeof hint, near, n, " (see --help)");
    return error_set(ST_INPUT, "%sunknown impl '%s'%s", where, word, hint);
}

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
            return unknown_impl("--impl: ", word);
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

/* Every impl and device the selected cases name must exist, and every case
 * must fit the memory limit, before anything runs: a typo or an oversized
 * case last in a suite should not cost the runs before it, and a CPU build
 * refuses a GPU case in one line. */
static int check_impls(const struct ckpt_case *const *run, int n_run, const struct overrides *o)
{
    for (int i = 0; i < n_run; i++) {
        struct ckpt_case c = *run[i];
        int st = apply_overrides(&c, o);
        if (st)
            return st;
        for (int k = 0; k < c.n_impls; k++)
            if (!impl_find(c.impls[k])) {
                char where[CASE_NAME_MAX + 1100];
                snprintf(where, sizeof where, "%s:%d: case %s: ", c.file, c.line, c.name);
                return unknown_impl(where, c.impls[k]);
            } else if (c.determinism_check == DETERMINISM_VALUES && impl_is_reentrant(impl_find(c.impls[k])))
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
        if ((st = model_check_devices(&c)) || (st = case_fit_check(&c)))
            return st;
    }
    return ST_OK;
}

/* The progress line follows the runs of the case in progress. */
struct run_progress {
    const struct progress *bar;
    int index;
};

static void show_run_started(void *ctx, const char *case_name, const char *run)
{
    const struct run_progress *rp = ctx;
    progress_run_start(rp->bar, rp->index, case_name, run);
}

int cli_run(int argc, char **argv)
{
    const char *cases_path = getenv("CKPT_CASES") ? getenv("CKPT_CASES") : CKPT_CASES_DIR;
    const char *out_dir = NULL, *suite = NULL, *selected[MAX_SELECTED], *compare_to = NULL, *external = NULL;
    int progress_lines = 0, list_removed = 0;
    double external_timeout = EXTERNAL_TIMEOUT_DEFAULT_S;
    struct shard shard = {1, 1};
    int n_selected = 0, list = 0;
    struct overrides o = {0};
    enum { OPT_CASES = 256, OPT_STEPS, OPT_SEED, OPT_THREADS, OPT_DEVICE, OPT_VERIFY, OPT_SHARD, OPT_COMPARE, OPT_PROGRESS, OPT_EXTERNAL, OPT_IMPL_LIB, OPT_VERSION,
           OPT_REPEATS, OPT_EXTERNAL_TIMEOUT, OPT_LIST_REMOVED };
    static const struct option options[] = {
        {"case", required_argument, NULL, 'c'},        {"cases", required_argument, NULL, OPT_CASES},
        {"list", no_argument, NULL, 'l'},              {"impl", required_argument, NULL, 'i'},
        {"out", required_argument, NULL, 'o'},         {"steps", required_argument, NULL, OPT_STEPS},
        {"seed", required_argument, NULL, OPT_SEED},   {"threads", required_argument, NULL, OPT_THREADS},
        {"device", required_argument, NULL, OPT_DEVICE}, {"verify-values", no_argument, NULL, OPT_VERIFY},
        {"suite", required_argument, NULL, 's'},       {"help", no_argument, NULL, 'h'},
        {"shard", required_argument, NULL, OPT_SHARD}, {"compare-to", required_argument, NULL, OPT_COMPARE},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"list-removed", no_argument, NULL, OPT_LIST_REMOVED},
        {"external", required_argument, NULL, OPT_EXTERNAL},
        {"impl-lib", required_argument, NULL, OPT_IMPL_LIB},
        {"version", no_argument, NULL, OPT_VERSION},
        {"repeats", required_argument, NULL, OPT_REPEATS},
        {"external-timeout", required_argument, NULL, OPT_EXTERNAL_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    int opt;
    char *end;
    opterr = 0; /* one line of our own instead of getopt's and the usage text */
    while ((opt = getopt_long(argc, argv, ":c:lhi:o:s:", options, NULL)) != -1) {
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
        case 'i': o.impls = optarg; break;
        case 'o': out_dir = optarg; break;
        case 's': suite = optarg; break;
        case OPT_DEVICE: o.device = optarg; break;
        case OPT_VERIFY: o.verify_values = 1; break;
        case OPT_COMPARE: compare_to = optarg; break;
        case OPT_PROGRESS: progress_lines = 1; break;
        case OPT_LIST_REMOVED: list_removed = 1; break;
        case OPT_IMPL_LIB:
            if (impl_load_plugin(optarg))
                return cli_fail(ST_INPUT);
            break;
        case OPT_EXTERNAL:
            if (!optarg[0]) {
                fprintf(stderr, "ckpt-verify: --external needs a command\n");
                return EXIT_USAGE;
            }
            external = optarg;
            break;
        case OPT_EXTERNAL_TIMEOUT:
            external_timeout = strtod(optarg, &end);
            if (*end || !*optarg || !(external_timeout >= 0) || isinf(external_timeout)) {
                fprintf(stderr, "ckpt-verify: --external-timeout: '%s' is not a number of seconds >= 0\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_SHARD:
            if (shard_parse(optarg, &shard))
                return cli_fail(ST_INPUT);
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
        case 'h': cli_usage(stdout); return 0;
        case OPT_VERSION: cli_print_version(stdout); return 0;
        case ':':
            fprintf(stderr, "ckpt-verify: option '%s' needs a value (see --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        default: {
            char hint[256];
            cli_option_hint(hint, sizeof hint, argv[optind - 1], options, " (see --help)");
            fprintf(stderr, "ckpt-verify: unknown option '%s'%s\n", argv[optind - 1], hint);
            return EXIT_USAGE;
        }
        }
    }
    if (optind < argc) {
        char hint[128];
        if (cli_subcommand_hint(hint, sizeof hint, argv[optind]))
            fprintf(stderr, "ckpt-verify: unknown subcommand '%s'%s\n", argv[optind], hint);
        else
            fprintf(stderr, "ckpt-verify: unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (out_dir && cli_check_out_dir(out_dir))
        return cli_fail(ST_INPUT);
    int device;
    if (o.device && aten_parse_device(o.device, &device)) {
        fprintf(stderr, "ckpt-verify: --device: %s\n", error_message());
        return EXIT_USAGE;
    }
    if (o.impls) {
        char impls[CASE_MAX_IMPLS][CASE_WORD_MAX];
        int n_impls;
        if (parse_impl_list(o.impls, impls, &n_impls))
            return cli_fail(ST_INPUT);
    }

    struct case_list cases = {0};
    int st = case_list_load(&cases, cases_path);
    if (st)
        return cli_fail(st);
    /* Which cases: the named ones, else a suite's, else the smoke suite
     * (--list alone: every case). An unknown name or label is refused the
     * same way with --list as without it. */
    const struct ckpt_case **run = calloc((size_t)cases.count + 1, sizeof *run);
    int n_run = 0;
    for (int i = 0; i < n_selected; i++) {
        const struct ckpt_case *c = case_list_find(&cases, selected[i]);
        if (!c) {
            const char *near[3] = {0};
            char hint[CASE_NAME_MAX * 3 + 64];
            int n = case_list_suggest(&cases, selected[i], near, 3);
            text_format_suggestions(hint, sizeof hint, near, n, "; see --list");
            fprintf(stderr, "ckpt-verify: unknown case '%s'%s\n", selected[i], hint);
            free(run);
            case_list_free(&cases);
            return EXIT_USAGE;
        }
        run[n_run++] = c;
    }
    if (!n_selected && list && !suite) {
        for (int i = 0; i < cases.count; i++)
            run[n_run++] = &cases.items[i];
    } else if (!n_selected) {
        const char *label = suite ? suite : "smoke";
        for (int i = 0; i < cases.count; i++)
            if (case_has_label(&cases.items[i], label))
                run[n_run++] = &cases.items[i];
        if (!n_run) {
            const char *near[3];
            char hint[256];
            int n = case_list_suggest_label(&cases, label, near, 3);
            text_format_suggestions(hint, sizeof hint, near, n, "; see --list");
            fprintf(stderr, "ckpt-verify: no case is labelled '%s' in %s%s\n", label, cases_path, hint);
            free(run);
            case_list_free(&cases);
            return EXIT_USAGE;
        }
    }
    if (list) {
        /* The selection: `--suite nightly --list | wc -l` is the suite's
         * size, and the impls summed its records (docs quote both,
         * tests/check_docs_figures.py checks them). The total goes to
         * stderr, so that stdout stays one line per case for scripts. */
        int records = 0;
        for (int i = 0; i < n_run; i++) {
            const struct ckpt_case *c = run[i];
            printf("%-32s %s:%d  impls: %d  labels:", c->name, c->file, c->line, c->n_impls);
            for (int k = 0; k < c->n_labels; k++)
                printf("%s%s", k ? "," : " ", c->labels[k]);
            printf("\n");
            records += c->n_impls;
        }
        fflush(stdout);
        fprintf(stderr, "total: %d case%s, %d case x impl record%s%s%s%s\n", n_run, n_run == 1 ? "" : "s", records,
                records == 1 ? "" : "s",
                n_selected ? "" : " (", n_selected ? "" : (suite ? suite : "every case"),
                n_selected ? "" : ")");
        free(run);
        case_list_free(&cases);
        return 0;
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
        return cli_fail(st);
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
    if ((st = cli_make_dirs(out_dir)) || (st = aten_init())) {
        json_decref(previous);
        free(index_of);
        free(run);
        case_list_free(&cases);
        return cli_fail(st);
    }

    cli_announce_blas(isatty(STDOUT_FILENO) ? stdout : NULL);
    /* A reused --out: the reports its previous summary named, so those
     * this run does not write again go once its own summary is written
     * (read under the directory's lock: another run may be writing it). */
    int lock = -1;
    json_t *stale = NULL;
    if ((st = out_dir_lock(out_dir, &lock))) {
        json_decref(previous);
        free(index_of);
        free(run);
        case_list_free(&cases);
        return cli_fail(st);
    }
    stale = stale_reports_before(out_dir);
    out_dir_unlock(lock);
    struct summary_torch torch = {aten_libtorch_version(), torch_compiled_cuda(), torch_pinned_version()};
    struct summary *summary = NULL;
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION, &torch)) ||
        (st = summary_set_run(summary, n_selected ? NULL : suite ? suite : "smoke", shard.k, shard.n))) {
        summary_free(summary);
        json_decref(stale);
        json_decref(previous);
        free(index_of);
        free(run);
        case_list_free(&cases);
        return cli_fail(st);
    }
    struct run_settings settings = {.out_dir = out_dir, .git_rev = CKPT_GIT_REV, .harness_version = CKPT_VERSION,
                                    .repeats = o.repeats,
                                    /* Read once, before any case sets its own. */
                                    .default_threads = aten_get_threads(),
                                    .fit_threads_to_size = getenv("OMP_NUM_THREADS") == NULL};
    int unexpected = 0, worst = 0;
    struct case_result *result = calloc(1, sizeof *result);
    struct progress bar;
    progress_init(&bar, stderr,
                  isatty(STDERR_FILENO) ? PROGRESS_TERMINAL : progress_lines ? PROGRESS_LINES : PROGRESS_QUIET, n_run);
    struct run_progress runs_of_case = {&bar, 0};
    settings.run_started = show_run_started;
    settings.run_started_ctx = &runs_of_case;
    for (int i = 0; i < n_run && result; i++) {
        struct ckpt_case c = *run[i];
        runs_of_case.index = i;
        progress_case_start(&bar, i, c.name);
        double started = progress_now();
        if ((st = apply_overrides(&c, &o))) {
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        /* The case's own status: it decides this case's records, never
         * the run's exit code directly. */
        case_result_free(result); /* the previous case's texts */
        int case_st = runner_run_case(&c, &settings, result);
        if (!case_st && external && result->h5_path[0]) {
            /* Another producer's runs, judged with the harness's. */
            struct case_result *with_external = calloc(1, sizeof *with_external);
            if (!with_external) {
                case_st = error_set(ST_INTERNAL, "out of memory");
            } else if (!(case_st = external_append_runs(external, external_timeout, result->h5_path, with_external))) {
                case_result_free(result); /* result takes with_external's texts */
                *result = *with_external;
            } else {
                case_result_free(with_external);
            }
            free(with_external);
        }
        if (case_st && !result->status) {
            /* Failed after the runner was done (--external): the result
             * carries the failure, so its records cannot read as green. */
            result->status = case_st;
            snprintf(result->error, sizeof result->error, "%s", error_message());
        }
        progress_case_done(&bar, i, result, progress_now() - started);
        if (case_st == ST_INPUT) {
            worst = EXIT_USAGE;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        report_print_case(stdout, result);
        fflush(stdout);
        if (!case_st && result->h5_path[0])
            stale_reports_own(stale, result->h5_path);
        if ((st = summary_add_case_run(summary, result, index_of[i], progress_now() - started))) {
            worst = EXIT_INTERNAL;
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            break;
        }
        /* A case that could not run, or whose report could not be written
         * (a full disk), is unexpected whatever its verdicts say; its
         * records say so (ERROR, expected false). */
        if (case_st)
            unexpected++;
        else
            for (int k = 0; k < result->n_results; k++)
                unexpected += !result->results[k].expected;
    }
    if (!result)
        worst = EXIT_INTERNAL;
    /* The comparison with --compare-to comes before the summary is written:
     * its regressions go into summary.json and junit.xml (a job that exits 1
     * for one must not publish a green report); its lines print after the
     * run's own, as before. */
    struct regress_counts regressions = {0};
    int compare_st = ST_OK;
    char *regress_text = NULL;
    size_t regress_len = 0;
    if (previous && !worst) {
        json_t *found = json_array();
        FILE *mem = open_memstream(&regress_text, &regress_len);
        struct regress_options ro;
        regress_default_options(&ro);
        ro.list_removed = list_removed;
        if (!found || !mem)
            compare_st = error_set(ST_INTERNAL, "compare: out of memory");
        else if ((compare_st = regress_compare(previous, summary_json(summary), compare_to, &ro, mem, &regressions,
                                               found)))
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
        if (mem)
            fclose(mem);
        if (!compare_st && (compare_st = summary_set_regressions(summary, found)))
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
        json_decref(found);
    }
    if (worst) {
        /* An input error stopped the run: no summary claims the cases it
         * did not get to, and a previous summary in out_dir stays. */
        st = ST_OK;
    } else if (compare_st) {
        st = compare_st; /* no summary without the regressions it must carry */
    } else {
        /* A summary and junit.xml that cannot both be written (a full
         * disk) leave the previous pair whole and, like a report that
         * cannot be, exit 1. The summary's read-modify-write, the stale
         * reports' removal and the page hold the directory's lock: a run
         * that overlaps this one keeps its records and its reports. */
        summary_set_wall_time(summary); /* the run's own, measured: what the page's header says */
        if ((st = out_dir_lock(out_dir, &lock)) || (st = stale_reports_merge(out_dir, stale, summary_root(summary))) ||
            (st = junit_write_with_summary(summary_json(summary), out_dir, NULL))) {
            fprintf(stderr, "ckpt-verify: %s\n", error_message());
            unexpected++;
            st = ST_OK;
        } else {
            stale_reports_clear(out_dir, stale, summary_json(summary), stdout);
            cli_write_report_html(out_dir); /* the page is read from the summary just written */
        }
        out_dir_unlock(lock);
        mutation_matrix_print(stdout, summary_json(summary));
        printf("%d case(s); %s; report in %s\n", n_run,
               unexpected ? "UNEXPECTED verdicts (see NO above)" : "all verdicts as expected", out_dir);
        if (regress_text)
            fputs(regress_text, stdout);
    }
    free(regress_text);
    json_decref(stale);
    json_decref(previous);
    free(index_of);
    if (result)
        case_result_free(result);
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
