/* bench: `ckpt-verify bench [--quick] [--out DIR]`, the memory and time
 * benchmark (harness/report/bench.h). */
#include <stdio.h>
#include <time.h>

#include "aten/aten.h"
#include "bench.h"
#include "cli.h"
#include "error.h"

int cli_bench(int argc, char **argv)
{
    struct bench_options o;
    int help, met, st;
    if ((st = bench_parse_args(argc, argv, &o, &help)))
        return cli_fail(st);
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
