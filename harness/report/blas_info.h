/* blas_info: which BLAS this process computes with, read from the running
 * process, never from the build: the library that defines `sgemm_`, its
 * real path, and a name ("Intel MKL 2024.2 (in libtorch_cpu.so)" for PyPI's
 * torch, which links MKL in; "OpenBLAS 0.3.21 (pthread)" or "reference BLAS
 * (libblas3)" for a libtorch that calls the system's libblas.so.3). */
#ifndef CKPT_BLAS_INFO_H
#define CKPT_BLAS_INFO_H

#define BLAS_INFO_NAME_MAX 160
#define BLAS_INFO_PATH_MAX 1024

struct blas_info {
    char name[BLAS_INFO_NAME_MAX];  /* what to print and record */
    char path[BLAS_INFO_PATH_MAX];  /* real path of the library defining sgemm_; "" when none */
    int is_reference;               /* the netlib reference BLAS: correct, ~25x slower */
};

/* Finds the library that provides sgemm_ in this process and names it.
 * Never fails: a process with no sgemm_ gets a name that says so. */
void blas_info_detect(struct blas_info *info);

/* The naming rule, apart from the process (unit-tested): `path` is the real
 * path of the library defining sgemm_ (NULL or "" when none does),
 * `openblas_config` what its openblas_get_config() returned (NULL when it
 * has none), `openblas_parallel` its openblas_get_parallel() (0 sequential,
 * 1 pthread, 2 OpenMP; -1 unknown). */
void blas_info_name(struct blas_info *info, const char *path, const char *openblas_config, int openblas_parallel);

/* The same for an MKL linked into a library (PyPI's libtorch_cpu.so):
 * `mkl_version` is what its mkl_get_version_string() wrote (NULL if none). */
void blas_info_name_mkl(struct blas_info *info, const char *path, const char *mkl_version);

/* The one-line warning for a slow BLAS, or NULL when there is none to give. */
const char *blas_info_warning(const struct blas_info *info);

#endif
