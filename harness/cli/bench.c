/* bench: `ckpt-verify bench [--quick] [--out DIR]`, the memory and time
 * benchmark (harness/train/bench.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aten/aten.h"
#include "bench.h"
#include "cli.h"
#include "error.h"

/* The flags (argv[0] is "bench"): ST_OK, or ST_INPUT with the message of
 * a bad value; a flag getopt refused (unknown, or its value missing) is
 * *bad_opt and *bad_arg for cli_option_error, which names it once and the
 * options near an unknown one, as every other command does. */
static int parse_args(int argc, char **argv, struct bench_options *o, int *help, int *bad_opt,
                      const char **bad_arg, const struct option **table)
{
    enum { OPT_CASES = 256, OPT_REPEATS, OPT_KEEP, OPT_DEVICE };
    static const struct option options[] = {
        {"quick", no_argument, NULL, 'q'},           {"out", required_argument, NULL, 'o'},
        {"cases", required_argument, NULL, OPT_CASES}, {"repeats", required_argument, NULL, OPT_REPEATS},
        {"keep-h5", no_argument, NULL, OPT_KEEP},    {"device", required_argument, NULL, OPT_DEVICE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    *help = *bad_opt = 0;
    *table = options;
    optind = 1;
    opterr = 0; /* cli_option_error names the flag, once */
    int opt;
    while ((opt = getopt_long(argc, argv, ":hqo:", options, NULL)) != -1) {
        switch (opt) {
        case 'q': o->quick = 1; break;
        case 'o': o->out_dir = optarg; break;
        case OPT_CASES: o->cases_path = optarg; break;
        case OPT_KEEP: o->keep_h5 = 1; break;
        case OPT_DEVICE: {
            int device;
            if (aten_parse_device(optarg, &device))
                return error_wrap(ST_INPUT, "bench --device");
            o->device = optarg;
            break;
        }
        case OPT_REPEATS: {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || !*optarg || v < 1 || v > 1000)
                return error_set(ST_INPUT, "bench --repeats: '%s' is not a number 1..1000", optarg);
            o->repeats = (int)v;
            break;
        }
        case 'h': *help = 1; return ST_OK;
        default:
            *bad_opt = opt;
            *bad_arg = argv[optind - 1];
            return ST_OK;
        }
    }
    if (optind < argc)
        return error_set(ST_INPUT, "bench: unexpected argument '%s'", argv[optind]);
    return ST_OK;
}

int cli_bench(int argc, char **argv)
{
    struct bench_options o;
    const struct option *options;
    const char *bad_arg = NULL;
    int help, met, st, bad_opt;
    if ((st = parse_args(argc, argv, &o, &help, &bad_opt, &bad_arg, &options)))
        return cli_fail(st);
    if (bad_opt)
        return cli_option_error("bench", bad_opt, bad_arg, options);
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
    if ((st = cli_make_dirs(o.out_dir)) || (st = aten_init()))
        return cli_fail(st);
    cli_announce_blas(NULL); /* bench's own header names the BLAS */
    if ((st = bench_run(&o, stdout, &met)))
        return cli_fail(st);
    return met ? 0 : EXIT_UNEXPECTED;
}
