/* dladdr, RTLD_DEFAULT and RTLD_NOLOAD are GNU extensions. */
#define _GNU_SOURCE
#include "blas_info.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Debian's reference BLAS (package libblas3) lives in .../blas/libblas.so.3*:
 * the libblas.so.3 alternative of lowest priority. */
static int is_reference_path(const char *path)
{
    const char *file = base_name(path);
    if (strncmp(file, "libblas.so", 10) != 0 || file - path < 6)
        return 0;
    return strncmp(file - 6, "/blas/", 6) == 0;
}

static const char *parallel_name(int parallel, const char *path)
{
    switch (parallel) {
    case 0: return "serial";
    case 1: return "pthread";
    case 2: return "OpenMP";
    default: break;
    }
    /* Debian installs each threading flavour in its own directory. */
    if (path && strstr(path, "openblas-pthread"))
        return "pthread";
    if (path && strstr(path, "openblas-openmp"))
        return "OpenMP";
    if (path && strstr(path, "openblas-serial"))
        return "serial";
    return NULL;
}

void blas_info_name(struct blas_info *info, const char *path, const char *openblas_config, int openblas_parallel)
{
    memset(info, 0, sizeof *info);
    snprintf(info->path, sizeof info->path, "%s", path ? path : "");
    if (!info->path[0]) {
        snprintf(info->name, sizeof info->name, "none found (no sgemm_ in the process)");
        return;
    }
    if (openblas_config) {
        /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64":
         * the product and its version are the first two words. */
        char product[64] = "", version[64] = "";
        if (sscanf(openblas_config, "%63s %63s", product, version) < 1)
            snprintf(product, sizeof product, "OpenBLAS");
        const char *threading = parallel_name(openblas_parallel, info->path);
        snprintf(info->name, sizeof info->name, "%s%s%s%s%s%s", product, version[0] ? " " : "", version,
                 threading ? " (" : "", threading ? threading : "", threading ? ")" : "");
        return;
    }
    if (is_reference_path(info->path)) {
        info->is_reference = 1;
        snprintf(info->name, sizeof info->name, "reference BLAS (libblas3)");
        return;
    }
    snprintf(info->name, sizeof info->name, "BLAS from %s", base_name(info->path));
}

void blas_info_name_mkl(struct blas_info *info, const char *path, const char *mkl_version)
{
    memset(info, 0, sizeof *info);
    snprintf(info->path, sizeof info->path, "%s", path ? path : "");
    /* "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build
     * 20240605 for ...": the release is the word after "Version". */
    const char *v = mkl_version ? strstr(mkl_version, "Version ") : NULL;
    char release[64] = "";
    if (v)
        sscanf(v + 8, "%63[^- ]", release);
    snprintf(info->name, sizeof info->name, "Intel MKL%s%s (in %s)", release[0] ? " " : "", release,
             info->path[0] ? base_name(info->path) : "this process");
}

/* Names the library that defines sgemm_ by its own version queries, looked
 * up in it and its dependencies only (`lib`, NULL when it cannot be
 * opened). PyPI's torch links MKL into libtorch_cpu.so, which then answers
 * MKL's query. Debian's OpenBLAS libblas.so.3 is a thin library over
 * libopenblas.so.0, whose queries answer: an OpenBLAS loaded beside a
 * reference BLAS (for LAPACK, say) must not name the reference one. */
static void name_by_own_queries(struct blas_info *info, void *lib, const char *path)
{
    void (*mkl_version)(char *, int) = NULL;
    char *(*get_config)(void) = NULL;
    int (*get_parallel)(void) = NULL;
    if (lib) {
        *(void **)&mkl_version = dlsym(lib, "mkl_get_version_string");
        if (!mkl_version)
            *(void **)&mkl_version = dlsym(lib, "MKL_Get_Version_String");
        *(void **)&get_config = dlsym(lib, "openblas_get_config");
        *(void **)&get_parallel = dlsym(lib, "openblas_get_parallel");
    }
    if (mkl_version) {
        char text[256] = "";
        mkl_version(text, (int)sizeof text);
        text[sizeof text - 1] = '\0';
        blas_info_name_mkl(info, path, text);
        return;
    }
    blas_info_name(info, path, get_config ? get_config() : NULL, get_parallel ? get_parallel() : -1);
}

void blas_info_detect(struct blas_info *info)
{
    /* The same global lookup the dynamic linker did for libtorch's sgemm_
     * calls: the first library in load order that defines it. */
    void *sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
    Dl_info where;
    if (!sgemm || !dladdr(sgemm, &where) || !where.dli_fname) {
        blas_info_name(info, NULL, NULL, -1);
        return;
    }
    char real[PATH_MAX];
    const char *path = realpath(where.dli_fname, real) ? real : where.dli_fname;
    void *lib = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    name_by_own_queries(info, lib, path);
    if (lib)
        dlclose(lib);
}

const char *blas_info_warning(const struct blas_info *info)
{
    if (!info->is_reference)
        return NULL;
    return "warning: BLAS is the reference BLAS (libblas3), ~25x slower than OpenBLAS: "
           "install libopenblas0-pthread";
}
