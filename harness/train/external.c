/* external: see external.h. */
#define _POSIX_C_SOURCE 200809L

#include "external.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "child_wait.h"
#include "error.h"
#include "h5store.h"

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[1 << 16];
    size_t n;
    int st = ST_OK;
    if (!in || !out)
        st = error_set(ST_INPUT, "%s: cannot copy for the external command: %s", in ? to : from, strerror(errno));
    while (!st && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            st = error_set(ST_INPUT, "%s: cannot write: %s", to, strerror(errno));
    if (!st && ferror(in))
        st = error_set(ST_INPUT, "%s: cannot read: %s", from, strerror(errno));
    if (in)
        fclose(in);
    if (out && fclose(out) != 0 && !st)
        st = error_set(ST_INPUT, "%s: cannot write: %s", to, strerror(errno));
    return st;
}

/* The command's process group, ended with SIGKILL when the warden's
 * parent (ckpt-verify) dies: a killed ckpt-verify leaves nothing running. */
static void end_group(int sig)
{
    (void)sig;
    kill(0, SIGKILL);
}

/* The child of ckpt-verify, leader of the command's process group: it
 * asks the kernel for SIGHUP when ckpt-verify dies (prctl, Linux), starts
 * sh with the command, and ends the whole group on that signal; otherwise
 * it ends as sh ended. SIGTERM (the time out's, sent to the group) is left
 * to the command: the warden waits for it. Only async-signal-safe calls
 * between fork and exec. */
static void warden(pid_t parent, const char *script, const char *file)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = end_group;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGTERM, SIG_IGN);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGHUP);
#endif
    /* ckpt-verify may have died before the request was made. */
    if (getppid() != parent)
        end_group(SIGHUP);
    pid_t sh = fork();
    if (sh < 0)
        _exit(127);
    if (sh == 0) {
        signal(SIGHUP, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execl("/bin/sh", "sh", "-c", script, "ckpt-external", file, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(sh, &status, 0) < 0)
        if (errno != EINTR)
            _exit(127);
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        kill(getpid(), WTERMSIG(status));
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

/* `sh -c 'COMMAND "$1"' ckpt-external FILE`: the file name reaches the
 * command as one argument whatever characters it holds. The command runs
 * in its own process group under a warden, so a time out stops all it
 * started, and so does ckpt-verify's own death (SIGKILL included). */
static int run_command(const char *command, double timeout_s, const char *file)
{
    size_t len = strlen(command) + 8;
    char *script = malloc(len);
    if (!script)
        return error_set(ST_INTERNAL, "out of memory");
    snprintf(script, len, "%s \"$1\"", command);
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        free(script);
        return error_set(ST_INTERNAL, "cannot start the external command: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        warden(parent, script, file);
    }
    setpgid(pid, pid); /* also here: the time out may come before the child's own call */
    free(script);
    int status = 0, timed_out = child_wait_within(pid, timeout_s, &status);
    if (timed_out < 0)
        return error_set(ST_INTERNAL, "waiting for the external command: %s", strerror(errno));
    if (timed_out)
        return error_set(ST_INPUT, "external command '%s' did not finish within %g s (--external-timeout); stopped",
                         command, timeout_s);
    if (WIFSIGNALED(status))
        return error_set(ST_INPUT, "external command '%s' was killed by signal %d", command, WTERMSIG(status));
    if (WEXITSTATUS(status) != 0)
        return error_set(ST_INPUT, "external command '%s' failed (exit %d)", command, WEXITSTATUS(status));
    return ST_OK;
}

/* Every run the harness wrote must still be there. */
static int kept_runs(const char *command, const char *report, const char *copy)
{
    char (*before)[64] = NULL, (*after)[64] = NULL;
    int n_before = 0, n_after = 0;
    int st = h5store_list_runs(report, &before, &n_before);
    if (!st && (st = h5store_list_runs(copy, &after, &n_after)))
        st = error_wrap(st, "external command '%s' wrote a malformed report", command);
    for (int i = 0; !st && i < n_before; i++) {
        int found = 0;
        for (int k = 0; k < n_after && !found; k++)
            found = strcmp(before[i], after[k]) == 0;
        if (!found)
            st = error_set(ST_INPUT, "external command '%s' removed run %s from the report", command, before[i]);
    }
    free(before);
    free(after);
    return st;
}

int external_append_runs(const char *command, double timeout_s, const char *report, struct case_result *out)
{
    char copy[1100];
    snprintf(copy, sizeof copy, "%s.external-%ld.tmp", report, (long)getpid());
    int st = copy_file(report, copy);
    if (!st)
        st = run_command(command, timeout_s, copy);
    if (!st)
        st = kept_runs(command, report, copy);
    if (!st && (st = judge_file(copy, NULL, out)) == ST_INPUT)
        error_wrap(st, "external command '%s' wrote a malformed run", command);
    if (!st && rename(copy, report) != 0)
        st = error_set(ST_INPUT, "%s: cannot replace it with the external runs: %s", report, strerror(errno));
    if (st) {
        unlink(copy);
        return st;
    }
    snprintf(out->h5_path, sizeof out->h5_path, "%s", report);
    return ST_OK;
}
