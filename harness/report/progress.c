#include "progress.h"

#include <string.h>
#include <time.h>

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(struct progress *p, FILE *out, enum progress_mode mode, int total)
{
    p->out = out;
    p->mode = mode;
    p->total = total;
    p->start = progress_now();
}

static void clock_text(char *buf, size_t len, double seconds)
{
    long s = seconds < 0 ? 0 : (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, len, "%ld:%02ld", s / 60, s % 60);
}

void progress_status_text(char *buf, size_t len, int index, int total, const char *name, double elapsed)
{
    char spent[32], left[32];
    clock_text(spent, sizeof spent, elapsed);
    if (index == 0) { /* nothing measured yet: no estimate */
        snprintf(buf, len, "[%d/%d] %s  %s elapsed", index + 1, total, name, spent);
        return;
    }
    clock_text(left, sizeof left, elapsed / index * (total - index));
    snprintf(buf, len, "[%d/%d] %s  %s elapsed, ~%s left", index + 1, total, name, spent, left);
}

/* Appends text at the end of buf; a line cut at len is still a line. */
static void append(char *buf, size_t len, const char *text)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%s", text);
}

void progress_case_text(char *buf, size_t len, int index, int total, const struct case_result *r, double seconds)
{
    char part[RESULT_ERROR_MAX + 64];
    snprintf(buf, len, "[%d/%d] %s:", index + 1, total, r->name);
    if (r->n_results == 0) {
        snprintf(part, sizeof part, " ERROR (%s)", r->error);
        append(buf, len, part);
    }
    for (int i = 0; i < r->n_results; i++) {
        const struct impl_result *x = &r->results[i];
        snprintf(part, sizeof part, "%s %s %s%s", i ? "," : "", x->impl, verdict_name(x->verdict),
                 x->expected ? "" : " (unexpected)");
        append(buf, len, part);
    }
    snprintf(part, sizeof part, " (%.2f s)", seconds);
    append(buf, len, part);
}

void progress_case_start(const struct progress *p, int index, const char *name)
{
    if (p->mode != PROGRESS_TERMINAL)
        return;
    char line[256];
    progress_status_text(line, sizeof line, index, p->total, name, progress_now() - p->start);
    fprintf(p->out, "\r\033[K%s", line);
    fflush(p->out);
}

void progress_run_start(const struct progress *p, int index, const char *case_name, const char *run)
{
    if (p->mode != PROGRESS_TERMINAL)
        return;
    char name[160], line[256];
    snprintf(name, sizeof name, "%s: %s", case_name, run);
    progress_status_text(line, sizeof line, index, p->total, name, progress_now() - p->start);
    fprintf(p->out, "\r\033[K%s", line);
    fflush(p->out);
}

void progress_case_done(const struct progress *p, int index, const struct case_result *r, double seconds)
{
    if (p->mode == PROGRESS_TERMINAL) {
        fprintf(p->out, "\r\033[K");
    } else if (p->mode == PROGRESS_LINES) {
        char line[1024];
        progress_case_text(line, sizeof line, index, p->total, r, seconds);
        fprintf(p->out, "%s\n", line);
    } else {
        return;
    }
    fflush(p->out);
}
