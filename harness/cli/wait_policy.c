/* wait_policy: OpenMP workers that sleep while they wait, unless the caller
 * says otherwise. When OMP_WAIT_POLICY is unset, the process re-executes
 * itself once with OMP_WAIT_POLICY=PASSIVE before any library has started.
 *
 * Why: libtorch's OpenMP (libgomp) spins each idle worker for a while before
 * it sleeps. On a shared or loaded machine the spinning workers take the
 * cores the other processes need: the 113-case nightly took 494 s wall
 * (250 s of CPU) with spinning workers and 94 s (35 s) with sleeping ones,
 * on 2 cores under a load of 5-6 (docs/performance.md, "Threads").
 *
 * Why a re-execution: libgomp reads OMP_WAIT_POLICY once, in its own
 * constructor, before main; and glibc's own initialiser, which runs first,
 * resets the environment to the one the kernel passed, so setenv() in any
 * earlier hook is lost. The one moment that works is this executable's
 * .preinit_array: the loader has mapped and relocated every library, none
 * of their constructors (libtorch's operator registration, libgomp's) has
 * run. Re-executing there costs the loader's work once (tens of ms), not a
 * second start of libtorch. A caller's own OMP_WAIT_POLICY (ACTIVE, to
 * measure with spinning workers) is kept as it is. If the re-execution
 * cannot happen (no /proc, an environment too large to copy), the process
 * goes on with libgomp's default; `ckpt-verify --version` shows the policy. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#define WAIT_POLICY_SETTING "OMP_WAIT_POLICY=PASSIVE"
/* Nothing can be allocated yet: the new environment is built in place. */
#define WAIT_POLICY_MAX_ENV 4096

static char *with_wait_policy[WAIT_POLICY_MAX_ENV + 2];
static char self_path[4096];

static void passive_wait_or_caller_choice(int argc, char **argv, char **envp)
{
    (void)argc;
    size_t n = 0;
    for (; envp && envp[n]; n++) {
        if (strncmp(envp[n], "OMP_WAIT_POLICY=", 16) == 0)
            return; /* the caller's choice */
    }
    if (n > WAIT_POLICY_MAX_ENV)
        return;
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0 || (size_t)len >= sizeof self_path - 1)
        return;
    self_path[len] = '\0';
    for (size_t i = 0; i < n; i++)
        with_wait_policy[i] = envp[i];
    with_wait_policy[n] = (char *)WAIT_POLICY_SETTING;
    with_wait_policy[n + 1] = NULL;
    execve(self_path, argv, with_wait_policy);
    /* Only reached when execve failed: go on as started. */
}

/* Run by the dynamic loader before any library's constructor (executables
 * only: a shared library cannot have a .preinit_array). */
__attribute__((section(".preinit_array"), used)) static void (*const wait_policy_entry)(int, char **, char **) =
    passive_wait_or_caller_choice;
