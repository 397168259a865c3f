/* plot_gnuplot: the files the plots are drawn from and the gnuplot runs that
 * draw them. Data files are plain whitespace-separated text written to a
 * temporary and renamed; gnuplot gets its inputs as variables on its command
 * line, so the scripts under scripts/ can be re-run by hand. Each gnuplot
 * run is bounded (CKPT_CHILD_TIMEOUT): one that does not finish is killed
 * and no further plot is drawn. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_wait.h"
#include "error.h"
#include "plot.h"
#include "plot_internal.h"

extern char **environ;

#define ST_TIMEOUT_KILLED (-1) /* run_bounded: not an error status, the child outlasted its limit */

int plot_data_open(struct datafile *d, const struct plot_env *env, const char *name)
{
    snprintf(d->path, sizeof d->path, "%s/%s", env->plots_dir, name);
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp", d->path);
    if (!(d->f = fopen(d->tmp, "w")))
        return error_set(ST_INPUT, "%s: cannot write: %s", d->tmp, strerror(errno));
    return ST_OK;
}

int plot_data_close(struct datafile *d)
{
    int bad = ferror(d->f);
    if (fclose(d->f) != 0 || bad) {
        remove(d->tmp);
        return error_set(ST_INPUT, "%s: write failed", d->tmp);
    }
    if (rename(d->tmp, d->path) != 0) {
        remove(d->tmp);
        return error_set(ST_INPUT, "%s: cannot rename into place: %s", d->path, strerror(errno));
    }
    return ST_OK;
}

/* The program's path: as given when it has a '/', else the first
 * executable of that name on PATH. */
int plot_find_program(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 1;
        path = colon ? colon + 1 : NULL;
    }
    return 0;
}

/* How long one gnuplot run may take: CKPT_CHILD_TIMEOUT seconds, default
 * PLOT_CHILD_TIMEOUT_DEFAULT_S (a plot takes well under a second; a
 * gnuplot that never returns must not hold a run or its page for ever). An
 * unreadable value is the default. */
static double child_timeout(void)
{
    const char *env = getenv("CKPT_CHILD_TIMEOUT");
    char *end;
    double v = env && *env ? strtod(env, &end) : -1;
    return env && *env && !*end && v > 0 && !isinf(v) ? v : PLOT_CHILD_TIMEOUT_DEFAULT_S;
}

/* Runs program argv in a process group of its own and waits for it at
 * most child_timeout() seconds; past that the whole group is stopped
 * (child_wait.h: what it started goes too) and reaped. ST_OK with its wait
 * status, ST_TIMEOUT_KILLED, or ST_RUN when it cannot be started. */
static int run_bounded(const char *program, char **argv, int *status)
{
    posix_spawnattr_t attr;
    pid_t pid;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = posix_spawn(&pid, program, NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return error_set(ST_RUN, "cannot start %s: %s", program, strerror(rc));
    int timed_out = child_wait_within(pid, child_timeout(), status);
    if (timed_out < 0)
        return error_set(ST_RUN, "waiting for %s: %s", program, strerror(errno));
    return timed_out ? ST_TIMEOUT_KILLED : ST_OK;
}

/* What gnuplot left of name's outputs up to format t (an empty or partial
 * picture) is removed: no plot is better than a broken one that looks drawn. */
static void remove_outputs(const struct plot_env *env, const char *name, size_t t)
{
    static const char *const terms[] = {"png", "svg"};
    for (size_t k = 0; k <= t; k++) {
        char out[PATH_MAX_LEN + 16];
        snprintf(out, sizeof out, "%s/%s.%s", env->plots_dir, name, terms[k]);
        unlink(out);
    }
}

/* gnuplot -e "<vars>; term='png'; out='<plots>/<name>.png'" scripts/<script>,
 * then the same for SVG. Values in vars are quoted with single quotes, so
 * paths may not hold one (plot_run_dir checks). */
int plot_gnuplot_run(struct plot_env *env, const char *script, const char *name, const char *vars)
{
    static const char *const terms[] = {"png", "svg"};
    char script_path[PATH_MAX_LEN], expr[16384];
    snprintf(script_path, sizeof script_path, "%s/%s", env->scripts_dir, script);
    if (access(script_path, R_OK) != 0)
        return error_set(ST_INPUT, "%s: cannot read the gnuplot script: %s", script_path, strerror(errno));
    for (size_t t = 0; t < sizeof terms / sizeof terms[0]; t++) {
        if (!(env->formats & (1 << t)))
            continue; /* PLOT_PNG = 1 << 0, PLOT_SVG = 1 << 1 */
        snprintf(expr, sizeof expr, "%s; term='%s'; out='%s/%s.%s'", vars, terms[t], env->plots_dir, name, terms[t]);
        char *argv[] = {(char *)env->gnuplot, "-e", expr, script_path, NULL};
        int status, st = run_bounded(env->gnuplot, argv, &status);
        if (st == ST_TIMEOUT_KILLED) {
            remove_outputs(env, name, t);
            return error_set(ST_RUN, "plots not drawn: gnuplot did not finish in %g s on %s (killed; "
                                     "CKPT_CHILD_TIMEOUT sets the limit)", child_timeout(), script);
        }
        if (st)
            return st;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            remove_outputs(env, name, t);
            return error_set(ST_RUN, "gnuplot failed on %s (%s output); its messages are above", script, terms[t]);
        }
    }
    fprintf(env->log, "  %s/%s%s%s\n", env->plots_dir, name, env->formats & PLOT_PNG ? ".png" : "",
            env->formats == (PLOT_PNG | PLOT_SVG) ? ", .svg" : env->formats & PLOT_SVG ? ".svg" : "");
    env->drawn++;
    return ST_OK;
}

int plot_page_count(int n, int per_page)
{
    if (per_page < 1)
        per_page = 1;
    return n <= per_page ? 1 : (n + per_page - 1) / per_page;
}

void plot_page_name(char *buf, size_t len, const char *name, int page, int n_pages)
{
    if (n_pages <= 1)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s_%d", name, page + 1);
}

void plot_remove_pages(const struct plot_env *env, const char *name)
{
    static const char *const ext[] = {"png", "svg", "dat"};
    char path[PATH_MAX_LEN + 64];
    for (size_t e = 0; e < sizeof ext / sizeof *ext; e++) {
        snprintf(path, sizeof path, "%s/%s.%s", env->plots_dir, name, ext[e]);
        unlink(path);
    }
    /* pages are numbered from 1 without gaps: stop at the first missing */
    for (int k = 1;; k++) {
        int any = 0;
        for (size_t e = 0; e < sizeof ext / sizeof *ext; e++) {
            snprintf(path, sizeof path, "%s/%s_%d.%s", env->plots_dir, name, k, ext[e]);
            any |= unlink(path) == 0;
        }
        if (!any)
            break;
    }
}

void plot_skip(struct plot_env *env, const char *name, const char *why)
{
    fprintf(env->log, "  %s: skipped (%s)\n", name, why);
    env->skipped++;
}

/* A quoted string for a data file: gnuplot reads "..." as one column, to
 * the end of the line. A name from anyone's summary may hold a double
 * quote (it would end the column: shown as ') or a line break or other
 * control character (it would end the row: shown as a blank). */
void plot_put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c == '"' ? '\'' : c < 0x20 || c == 0x7f ? ' ' : c, f);
    }
    fputc('"', f);
}

struct byte_unit plot_byte_unit_for(double max_bytes)
{
    if (max_bytes >= 1024.0 * 1024 * 1024)
        return (struct byte_unit){1024.0 * 1024 * 1024, "GiB"};
    if (max_bytes >= 1024.0 * 1024)
        return (struct byte_unit){1024.0 * 1024, "MiB"};
    if (max_bytes >= 1024.0)
        return (struct byte_unit){1024.0, "KiB"};
    return (struct byte_unit){1.0, "bytes"};
}

int plot_blockset_open(struct blockset *b, const struct plot_env *env, const char *var, const char *file)
{
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", var);
    return plot_data_open(&b->file, env, file);
}

void plot_blockset_add(struct blockset *b, const char *title, const double *x, const double *y, int n, double scale,
                       const char *colour, int pt, int dt)
{
    int any = 0;
    for (int k = 0; k < n; k++)
        any |= !isnan(y[k]);
    if (!any || strlen(b->lc) + 16 > sizeof b->lc)
        return;
    plot_put_quoted(b->file.f, title);
    fputs(" \"\"\n", b->file.f);
    for (int k = 0; k < n; k++)
        if (!isnan(y[k]))
            fprintf(b->file.f, "%.10g %.10g\n", x[k], y[k] / scale);
    fputs("\n\n", b->file.f);
    size_t l = strlen(b->lc), p = strlen(b->pt), d = strlen(b->dt);
    snprintf(b->lc + l, sizeof b->lc - l, "%s%s", l ? " " : "", colour);
    snprintf(b->pt + p, sizeof b->pt - p, "%s%d", p ? " " : "", pt);
    snprintf(b->dt + d, sizeof b->dt - d, "%s%d", d ? " " : "", dt);
    b->n++;
}

/* Closes the file and appends its gnuplot variables to vars. */
int plot_blockset_close(struct blockset *b, char *vars, size_t len)
{
    int st = plot_data_close(&b->file);
    size_t off = strlen(vars);
    snprintf(vars + off, len - off, "%s%s='%s'; %s_n=%d; %s_lc='%s'; %s_pt='%s'; %s_dt='%s'", off ? "; " : "",
             b->name, b->file.path, b->name, b->n, b->name, b->lc, b->name, b->pt, b->name, b->dt);
    return st;
}

void plot_blockset_abort(struct blockset *b)
{
    if (b->file.f) {
        fclose(b->file.f);
        remove(b->file.tmp);
        b->file.f = NULL;
    }
}

const char *plot_impl_colour(const char *impl)
{
    static const char *const palette[] = {"#1e88e5", "#e53935", "#fb8c00", "#43a047", "#8e24aa", "#00acc1"};
    if (strcmp(impl, "reentrant") == 0)
        return "#7b1fa2";
    if (strcmp(impl, "nonreentrant") == 0)
        return "#00897b";
    unsigned h = 0;
    for (const char *c = impl; *c; c++)
        h = h * 31 + (unsigned char)*c;
    return palette[h % (sizeof palette / sizeof palette[0])];
}

const char *plot_policy_colour(const char *policy)
{
    if (strcmp(policy, "attention_core") == 0)
        return "#fb8c00";
    if (strcmp(policy, "save_matmuls") == 0)
        return "#e53935";
    return plot_impl_colour(policy);
}

/* Point types per group: filled for lines, open for points only. */
int plot_point_filled(int group) { return (int[]){7, 5, 9, 11, 13, 15}[group % 6]; }
int plot_point_open(int group) { return (int[]){6, 4, 8, 10, 12, 14}[group % 6]; }

