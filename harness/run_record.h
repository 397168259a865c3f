/* run_record: everything one run recorded — its tensors under stable
 * relative paths ("steps/1/loss", "steps/1/grads/l0.weight",
 * "final_params/l0.weight", "saved/1/fingerprints") in recorded order, and its
 * numeric attributes ("memory.peak_bytes", "timing.forward_ms", ...).
 * Filled by the runner, written and read by h5store, walked by compare. */
#ifndef CKPT_RUN_RECORD_H
#define CKPT_RUN_RECORD_H

#include "host_tensor.h"

#define RUN_PATH_MAX 160
#define RUN_ATTR_KEY_MAX 64

struct run_tensor {
    char path[RUN_PATH_MAX];
    struct host_tensor t;
};

struct run_attr {
    char key[RUN_ATTR_KEY_MAX]; /* "group.name": group is the HDF5 subgroup */
    double value;
};

struct run_record {
    char name[64];              /* "baseline_0", "reentrant", ... */
    int n, cap;
    struct run_tensor *items;
    int n_attrs, cap_attrs;
    struct run_attr *attrs;
};

void run_record_init(struct run_record *r, const char *name);
/* Takes ownership of t's buffer (t is zeroed). */
int run_record_add(struct run_record *r, const char *path, struct host_tensor *t);
int run_record_set_attr(struct run_record *r, const char *key, double value);
/* NULL / NAN when absent. */
const struct run_tensor *run_record_find(const struct run_record *r, const char *path);
double run_record_attr(const struct run_record *r, const char *key);
void run_record_free(struct run_record *r);

#endif
