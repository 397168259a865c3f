/* A plugin built against another ABI: --impl-lib must refuse it (exit 2). */
#include "../../impls/plugin.h"

const struct ckpt_plugin *ckpt_verify_plugin(void);

const struct ckpt_plugin *ckpt_verify_plugin(void)
{
    static const struct ckpt_plugin plugin = {.abi_version = CKPT_PLUGIN_ABI_VERSION + 1,
                                              .impl_size = sizeof(struct checkpoint_impl)};
    return &plugin;
}
