/* plugin: checkpoint impls from a shared library (`ckpt-verify --impl-lib
 * PATH.so`), for C and C++ frameworks that want their own checkpoint judged
 * on the harness's models. The library exports one symbol,
 *
 *     const struct ckpt_plugin *ckpt_verify_plugin(void);
 *
 * whose answer names the ABI it was built against and its impls (struct
 * checkpoint_impl, impls/impl.h). Impls call the harness's tape, ops and
 * shim (harness/autograd/tape.h, harness/aten/aten.h), which the ckpt-verify binary
 * exports. An impl with is_reference = 1 claims to be right (expected PASS
 * or NOISE), with 0 it is a planted bug (expected FAIL or MEMFAIL);
 * impls/plugin/example_checkpoint.c is a complete example.
 *
 * A plugin plants a bug as the harness does (impls/faulty/): its impl
 * names the one service it replaces (checkpoint_impl.services,
 * services.h) and runs a reference (impl_run_reentrant,
 * impl_run_nonreentrant, impl_run_selective), or resolves the table
 * itself (checkpoint_services_resolve) and calls the services from its
 * own checkpoint, as the example does. */
#ifndef CKPT_PLUGIN_H
#define CKPT_PLUGIN_H

#include <stddef.h>

#include "impl.h"
#include "services.h"

/* Bumped whenever struct checkpoint_impl, struct impl_options, struct
 * checkpoint_services or the functions a plugin may call change
 * incompatibly. 5: checkpoint_impl's planted-bug switches became the
 * services table. */
#define CKPT_PLUGIN_ABI_VERSION 5
#define CKPT_PLUGIN_SYMBOL "ckpt_verify_plugin"

struct ckpt_plugin {
    int abi_version;              /* CKPT_PLUGIN_ABI_VERSION of the headers it was built with */
    size_t impl_size;             /* sizeof(struct checkpoint_impl) there */
    const char *name;             /* the library, for messages ("example") */
    int n_impls;
    const struct checkpoint_impl *const *impls;
};

typedef const struct ckpt_plugin *(*ckpt_plugin_entry)(void);

/* Loads the library at path and registers its impls beside the built-in
 * ones (impl_find, impl_all). ST_INPUT, one line naming the file, for a
 * library that cannot be loaded, lacks the symbol, was built for another
 * ABI, or names an impl that exists already or is not a valid name. */
int impl_load_plugin(const char *path);

#endif
