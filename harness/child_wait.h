/* child_wait: waiting for a child process that leads its own process
 * group, for at most a given time; past it the whole group is stopped
 * (SIGTERM, then SIGKILL after a grace second) and waited for until it is
 * empty, so "stopped" means nothing it started is still running. Used by
 * the judge side (gnuplot) and the training side (--external) alike. */
#ifndef CKPT_CHILD_WAIT_H
#define CKPT_CHILD_WAIT_H

#include <sys/types.h>

/* Waits for pid (a process group leader) up to timeout_s seconds (<= 0:
 * for ever). 0 when it ended (*status set), 1 when it timed out and its
 * group was stopped and reaped, -1 on a wait error (errno). */
int child_wait_within(pid_t pid, double timeout_s, int *status);

#endif
