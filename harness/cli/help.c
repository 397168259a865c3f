/* help: the main command's --help (usage, the impls, exit codes)
 * and --version (harness, torch, CUDA, BLAS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aten/aten.h"
#include "aten/torch_runtime.h"
#include "blas_info.h"
#include "cli.h"
#include "external.h"
#include "impl.h"

void cli_usage(FILE *out)
{
    fprintf(out,
            "usage: ckpt-verify [options]                 run cases (default: the smoke suite)\n"
            "       ckpt-verify diff [-t ULP] [-j] A.h5[:run] B.h5[:run]\n"
            "                                               compare two runs of any schema files\n"
            "       ckpt-verify merge [--strict] OUT_DIR DIR...  merge run directories (shards) into one report\n"
            "       ckpt-verify judge [-o DIR] FILE.h5...   verdicts from the runs stored in report files\n"
            "       ckpt-verify plot RUN_DIR                determinism, memory and time plots (gnuplot)\n"
            "       ckpt-verify html RUN_DIR                (re)write RUN_DIR/report.html, the run's page\n"
            "       ckpt-verify bench [-q] [-o DIR]         memory and time benchmark\n"
            "Every command answers --help; options and operands go in any order.\n"
            "\n"
            "Runs each case with and without gradient checkpointing from the same seed, parameters\n"
            "and inputs, records every gradient to HDF5 and compares them bitwise (ULP distance when\n"
            "they differ, against the baseline's own run-to-run noise floor).\n"
            "\n"
            "options:\n"
            "  -c, --case NAME    run this case (repeatable)\n"
            "  -s, --suite LABEL  run every case labelled LABEL (smoke, nightly, ...)\n"
            "  --cases PATH       case file or directory (default: %s)\n"
            "  -l, --list         list the cases (with --suite or --case: those), impl count and labels, and exit;\n"
            "                     their total on stderr\n"
            "  -i, --impl LIST    comma-separated impls instead of each case's own\n"
            "  -o, --out DIR      output directory (default: reports/<UTC timestamp>): HDF5 files,\n"
            "                     summary.json, junit.xml and report.html\n"
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
            "  --list-removed     with --compare-to: a line per record of DIR not in this run (default: one line)\n"
            "  --progress         off a terminal, one line per finished case on stderr (default: quiet)\n"
            "  --impl-lib PATH.so load checkpoint impls from a plugin (impls/plugin.h); repeatable; given\n"
            "                     before --help, its impls are listed below with the built-in ones\n"
            "  --external CMD     after each case, run CMD REPORT.h5: it appends its own runs (docs/external.md)\n"
            "                     and all runs are judged together; a failing CMD or a malformed run: exit 2\n"
            "  --external-timeout S  stop CMD (its process group) after S seconds: exit 2 (default %g; 0: none)\n"
            "  --version          the harness, libtorch and BLAS this process runs with\n"
            "  -h, --help         this text\n"
            "\n"
            "impls:\n",
            CKPT_CASES_DIR, EXTERNAL_TIMEOUT_DEFAULT_S);
    for (const struct checkpoint_impl *const *i = impl_all(); *i; i++)
        fprintf(out, "  %-20s %s\n", (*i)->name, (*i)->summary);
    fprintf(out, "\nexit codes: 0 all verdicts expected, 1 an unexpected verdict (diff: a difference),\n"
                 "            2 usage or input error, 3 internal error\n"
                 "--version names the harness, torch and BLAS this process runs with.\n");
}

/* What this process computes with: the harness, the torch it was compiled
 * against and the one it runs with (harness/aten/torch_runtime.h), CUDA,
 * and the BLAS found at run time (harness/report/blas_info.h). */
void cli_print_version(FILE *out)
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
    /* Cases that name no thread count get this one, or 1 when too small to
     * use more (harness/train/thread_policy.h); idle workers wait as the
     * policy says (harness/cli/wait_policy.c: PASSIVE unless the caller set it). */
    const char *pinned = getenv("OMP_NUM_THREADS"), *wait = getenv("OMP_WAIT_POLICY");
    fprintf(out, "threads: %d intra-op (%s); OMP_WAIT_POLICY=%s\n", aten_get_threads(),
            pinned ? "OMP_NUM_THREADS" : "libtorch's default; 1 for a case too small to use more",
            wait ? wait : "unset (libgomp spins idle workers)");
}
