/* main: the full ckpt-verify command (training side and judge side).
 * Checks the torch it runs with, then hands the command line to the judge
 * side's subcommands (judge_side.c), to `bench`, or to the main run
 * (run.c). The only place that exits. */
#include <signal.h>
#include <string.h>

#include "aten/torch_runtime.h"
#include "cli.h"
#include "error.h"

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
        return cli_fail(st_torch);
    int code;
    if (cli_judge_side(argc, argv, &code))
        return code;
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return cli_bench(argc - 1, argv + 1);
    return cli_run(argc, argv);
}
