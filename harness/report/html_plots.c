/* html_plots: the run's plots drawn as SVG for report.html (html_plots.h). */
#include "html_plots.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "error.h"
#include "plot.h"

/* The order the page shows the families in: verdicts first, then time and
 * memory per case, then the sweeps. */
static const char *const families[] = {"determinism",       "overhead",       "held_per_case",   "peak_vs_batch",
                                       "saved_vs_segments", "saved_vs_depth", "memory_vs_depth", "held_vs_seq"};
#define N_FAMILIES (sizeof families / sizeof *families)

/* The family rank and page (0 for a single image) of "NAME.svg", -1 when it
 * is none of the plots. */
static int plot_rank(const char *file, int *page)
{
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 4, ".svg") != 0)
        return -1;
    for (size_t f = 0; f < N_FAMILIES; f++) {
        size_t l = strlen(families[f]);
        if (strncmp(file, families[f], l) != 0)
            continue;
        if (file + l == file + n - 4) {
            *page = 0;
            return (int)f;
        }
        if (file[l] == '_' && isdigit((unsigned char)file[l + 1])) {
            char *end;
            long p = strtol(file + l + 1, &end, 10);
            if (end == file + n - 4 && p > 0 && p < 100000) {
                *page = (int)p;
                return (int)f;
            }
        }
    }
    return -1;
}

static int by_rank(const void *a, const void *b)
{
    int pa = 0, pb = 0;
    const char *fa = ((const struct html_plot *)a)->name, *fb = ((const struct html_plot *)b)->name;
    char sa[80], sb[80];
    snprintf(sa, sizeof sa, "%s.svg", fa);
    snprintf(sb, sizeof sb, "%s.svg", fb);
    int ra = plot_rank(sa, &pa), rb = plot_rank(sb, &pb);
    return ra != rb ? ra - rb : pa - pb;
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The SVG from its <svg element on, every id (and each reference to one:
 * href='#id', url(#id)) prefixed with `prefix`: gnuplot names its point
 * symbols alike in every file, and one page must not hold an id twice.
 * NULL when the text is no SVG or holds what a drawing never needs and a
 * page must not run (a script, foreign markup). */
static char *svg_for_page(const char *text, const char *prefix, size_t *out_len)
{
    const char *start = strstr(text, "<svg");
    if (!start)
        return NULL;
    for (const char *p = start; *p; p++)
        if (*p == '<' && (strncasecmp(p + 1, "script", 6) == 0 || strncasecmp(p + 1, "foreignobject", 13) == 0 ||
                          strncasecmp(p + 1, "iframe", 6) == 0))
            return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return NULL;
    static const char *const marks[] = {" id='", " id=\"", "\tid='", "\tid=\"", "\nid='", "\nid=\"",
                                        "href='#", "href=\"#", "url(#"};
    for (const char *p = start; *p;) {
        size_t hit = 0;
        for (size_t m = 0; m < sizeof marks / sizeof *marks && !hit; m++)
            if (starts_with(p, marks[m]))
                hit = strlen(marks[m]);
        if (hit) {
            fwrite(p, 1, hit, out);
            fputs(prefix, out);
            p += hit;
        } else {
            fputc(*p++, out);
        }
    }
    if (fclose(out) != 0) {
        free(buf);
        return NULL;
    }
    *out_len = len;
    return buf;
}

static char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            char *grown = realloc(buf, cap = 2 * cap + 65536 + 1);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Everything the plot code left in the temporary directory, then the
 * directory itself. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[2048];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* The SVGs of dir into out, in the page's order. */
static void collect(const char *dir, struct html_plots *out)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(out->why, sizeof out->why, "the plots could not be read back: %s", strerror(errno));
        return;
    }
    struct dirent *e;
    int cap = 0, unreadable = 0;
    while ((e = readdir(d))) {
        int page;
        if (plot_rank(e->d_name, &page) < 0)
            continue;
        char path[2048], prefix[16];
        size_t len = 0, svg_len = 0;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = read_whole(path, &len);
        snprintf(prefix, sizeof prefix, "p%d-", out->n);
        char *svg = text ? svg_for_page(text, prefix, &svg_len) : NULL;
        free(text);
        if (!svg) {
            unreadable++;
            continue;
        }
        if (out->n == cap) {
            struct html_plot *grown = realloc(out->p, (size_t)(cap = 2 * cap + 8) * sizeof *grown);
            if (!grown) {
                free(svg);
                break;
            }
            out->p = grown;
        }
        struct html_plot *p = &out->p[out->n++];
        snprintf(p->name, sizeof p->name, "%.*s", (int)(strlen(e->d_name) - 4), e->d_name);
        p->svg = svg;
        p->len = svg_len;
    }
    closedir(d);
    if (out->n > 1) /* qsort of no pages would be handed a null array */
        qsort(out->p, (size_t)out->n, sizeof *out->p, by_rank);
    if (unreadable)
        snprintf(out->why, sizeof out->why, "%d plot(s) drawn could not be read back as SVG and are left out",
                 unreadable);
    else if (!out->n)
        snprintf(out->why, sizeof out->why, "this run's records give no plot anything to draw");
}

void html_plots_draw(const char *run_dir, const char *scripts_dir, const char *gnuplot, struct html_plots *out)
{
    memset(out, 0, sizeof *out);
    if (!gnuplot) {
        snprintf(out->why, sizeof out->why, "plots switched off (CKPT_GNUPLOT=none); `ckpt-verify html DIR` "
                 "without it draws them");
        return;
    }
    const char *tmp = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/ckpt-verify-plots.XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        snprintf(out->why, sizeof out->why, "no room to draw them in %s: %s", tmp, strerror(errno));
        return;
    }
    char *log = NULL;
    size_t log_len = 0;
    FILE *mem = open_memstream(&log, &log_len);
    int st = mem ? plot_run_dir_as(run_dir, dir, PLOT_SVG, scripts_dir, gnuplot, mem)
                 : error_set(ST_INTERNAL, "out of memory");
    if (mem)
        fclose(mem);
    if (st) {
        snprintf(out->why, sizeof out->why, "%s", error_message());
        /* A gnuplot killed past its limit is said where the run's output
         * is read too, not only on the page. */
        if (strncmp(out->why, "plots not drawn", 15) == 0)
            fprintf(stderr, "ckpt-verify: %s/report.html: %s\n", run_dir, out->why);
        error_clear();
    } else {
        collect(dir, out);
    }
    /* The plot code's own words on what it skipped, for the page. */
    if (log) {
        char *lines = NULL;
        size_t lines_len = 0;
        FILE *sk = open_memstream(&lines, &lines_len);
        for (char *line = strtok(log, "\n"); line && sk; line = strtok(NULL, "\n"))
            if (strstr(line, ": skipped ("))
                fprintf(sk, "%s\n", line + strspn(line, " "));
        if (sk)
            fclose(sk);
        if (lines && lines_len)
            out->skipped = lines;
        else
            free(lines);
    }
    free(log);
    remove_dir(dir);
}

void html_plots_free(struct html_plots *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->p[i].svg);
    free(p->p);
    free(p->skipped);
    memset(p, 0, sizeof *p);
}
