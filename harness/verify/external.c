#define _POSIX_C_SOURCE 200809L

#include "external.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* Waits for pid up to timeout_s seconds (<= 0: for ever); on time out
 * stops its process group (SIGTERM, then SIGKILL after a grace second)
 * and reaps it. 1 when it timed out, 0 when it ended (*status), -1 on a
 * wait error (errno). */
static int wait_within(pid_t pid, double timeout_s, int *status)
{
    const struct timespec tick = {0, 20 * 1000 * 1000};
    double waited = 0, grace = 0;
    int stopping = 0;
    for (;;) {
        pid_t got = waitpid(pid, status, timeout_s > 0 ? WNOHANG : 0);
        if (got == pid)
            return stopping;
        if (got < 0 && errno != EINTR)
            return -1;
        if (got == 0) {
            nanosleep(&tick, NULL);
            if (stopping && (grace += 0.02) >= 1.0)
                kill(-pid, SIGKILL);
            else if (!stopping && (waited += 0.02) >= timeout_s) {
                stopping = 1;
                kill(-pid, SIGTERM);
            }
        }
    }
}

/* `sh -c 'COMMAND "$1"' ckpt-external FILE`: the file name reaches the
 * command as one argument whatever characters it holds. The command runs
 * in its own process group, so a time out stops all it started. */
static int run_command(const char *command, double timeout_s, const char *file)
{
    size_t len = strlen(command) + 8;
    char *script = malloc(len);
    if (!script)
        return error_set(ST_INTERNAL, "out of memory");
    snprintf(script, len, "%s \"$1\"", command);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        free(script);
        return error_set(ST_INTERNAL, "cannot start the external command: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execl("/bin/sh", "sh", "-c", script, "ckpt-external", file, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: the time out may come before the child's own call */
    free(script);
    int status = 0, timed_out = wait_within(pid, timeout_s, &status);
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
