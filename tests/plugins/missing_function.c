/* A plugin that calls a function the harness does not export: loading it
 * must fail up front, naming the symbol, not in the middle of a run. */
#include "../../impls/plugin.h"

int ckpt_function_that_does_not_exist(void);
const struct ckpt_plugin *ckpt_verify_plugin(void);

const struct ckpt_plugin *ckpt_verify_plugin(void)
{
    static struct ckpt_plugin plugin = {.abi_version = CKPT_PLUGIN_ABI_VERSION,
                                        .impl_size = sizeof(struct checkpoint_impl)};
    plugin.n_impls = ckpt_function_that_does_not_exist();
    return &plugin;
}
