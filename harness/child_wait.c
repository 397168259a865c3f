/* child_wait: see child_wait.h. */
#define _POSIX_C_SOURCE 200809L

#include "child_wait.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* After a time out the leader is reaped, but what it started
 * may still be on its way out (a signal is delivered when the process is
 * next scheduled): ended with SIGKILL, and waited for until the group is
 * empty (at most two seconds), so "stopped" means stopped. */
static void end_stopped_group(pid_t group)
{
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 200 && kill(-group, SIGKILL) == 0; i++)
        nanosleep(&tick, NULL);
}

int child_wait_within(pid_t pid, double timeout_s, int *status)
{
    const struct timespec tick = {0, 20 * 1000 * 1000};
    double waited = 0, grace = 0;
    int stopping = 0;
    for (;;) {
        pid_t got = waitpid(pid, status, timeout_s > 0 ? WNOHANG : 0);
        if (got == pid) {
            if (stopping)
                end_stopped_group(pid);
            return stopping;
        }
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
