/* torch_runtime: the torch this process was compiled against, the torch it
 * actually runs with, and the one the repository pins. The compiled version
 * is fixed at configure time ("2.11.0+cu130", from the torch CMake found);
 * the running one is read from the libtorch the dynamic linker loaded (the
 * torch/version.py of a wheel, or the build-version file of a libtorch
 * distribution, beside its lib/). torch_runtime_check refuses a mismatch. */
#ifndef CKPT_TORCH_RUNTIME_H
#define CKPT_TORCH_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TORCH_RUNTIME_TEXT_MAX 128
#define TORCH_RUNTIME_PATH_MAX 1024

struct torch_runtime {
    char version[TORCH_RUNTIME_TEXT_MAX]; /* "2.11.0+cu130"; "unknown" when no version file was found */
    char cuda[TORCH_RUNTIME_TEXT_MAX];    /* the CUDA it was built with, "13.0"; "none" for a CPU build */
    char library[TORCH_RUNTIME_PATH_MAX]; /* the loaded libtorch_cpu (or libc10) as the linker named it */
};

const char *torch_compiled_version(void); /* the version this binary was compiled against */
const char *torch_compiled_cuda(void);    /* its CUDA build ("13.0", or "none") */
const char *torch_pinned_version(void);   /* env/requirements.txt's torch pin */

/* Reads what is loaded. ST_OK, or ST_INTERNAL when no libtorch is loaded
 * (the fields then say "unknown"). A libtorch with no version file beside
 * it gives version "unknown" and ST_OK: it cannot be checked. */
int torch_runtime_read(struct torch_runtime *rt);

/* The naming rule apart from the process (unit-tested): parses the text of
 * a torch/version.py ("__version__ = '2.11.0+cu130'", "cuda = '13.0'" or
 * "cuda: Optional[str] = None") or of a build-version file (the version
 * alone) into rt's version and cuda. Returns 1 when a version was found. */
int torch_runtime_parse(struct torch_runtime *rt, const char *text);

/* ST_OK when the running torch is the compiled one (or cannot be told);
 * else ST_INPUT with one line naming both versions and the loaded library. */
int torch_runtime_check(void);

#ifdef __cplusplus
}
#endif

#endif
