/* A plugin whose checkpoint fails inside its run with the error the tape
 * once gave when no gradient reached a checkpoint's input: the reentrant
 * reference whose nested backward makes its zeros on device 0 (cuda:0)
 * instead of the case's device. A case that runs it must give that run
 * ERROR, with the message, and the suite must go on to the next case. */
#include "../../impls/plugin.h"

static int zeros_on_device_0(struct var *const *roots, tensor *const *grads, int n)
{
    (void)grads;
    tensor *zeros = NULL;
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(roots[0]->data, shape);
    int st = tensor_zeros(&zeros, tensor_dtype(roots[0]->data), nd, shape, 0);
    if (!st)
        st = tape_backward(roots, &zeros, n > 0 ? 1 : 0);
    tensor_free(zeros);
    return st;
}

static const struct checkpoint_services services = {.nested_backward = zeros_on_device_0};

static const struct checkpoint_impl impl = {
    .name = "zeros_on_device_0",
    .summary = "test plugin: reentrant whose nested backward makes zeros on cuda:0",
    .run = impl_run_reentrant,
    .services = &services,
};

static const struct checkpoint_impl *const impls[] = {&impl};

const struct ckpt_plugin *ckpt_verify_plugin(void);

const struct ckpt_plugin *ckpt_verify_plugin(void)
{
    static const struct ckpt_plugin plugin = {
        .abi_version = CKPT_PLUGIN_ABI_VERSION,
        .impl_size = sizeof(struct checkpoint_impl),
        .name = "zeros_on_device_0",
        .n_impls = 1,
        .impls = impls,
    };
    return &plugin;
}
