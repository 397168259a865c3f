/* plot_internal: what the plot_*.c files share and callers of plot.h never
 * see: the summary records as the plots read them, the data files and the
 * gnuplot runs, and records grouped into curves along a swept case field.
 * Internal to harness/report/. */
#ifndef CKPT_PLOT_INTERNAL_H
#define CKPT_PLOT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "case.h"
#include "run_record.h"

#define PATH_MAX_LEN 1024
#define MAX_SERIES 64
#define MAX_POINTS 256

/* ---- the summary, as the plots need it (plot_summary.c) ------------------- */

/* A record's case definition (summary.json "case_definition"). */
struct def {
    int ok;
    char model[24], dtype[16], fusion[24], autocast[16];
    char policy[CASE_POLICY_MAX]; /* selective checkpointing's policy; "" for none */
    int layers, hidden, seq, batch, heads, segments; /* segments: 0 = every */
    double dropout;
};

struct rec {
    const char *case_name, *impl, *verdict;
    const char *role;   /* the run's role (summary "role"; "" when not recorded) */
    int expected;       /* the verdict is one the case allows */
    double distance;    /* the verdict's distance in scaled ULP (max_scaled_ulp); INFINITY when
                         * infinite, NAN where none was measured */
    const char *decided_by; /* what decided a FAIL where no distance did ("missing tensor"), or "" */
    int overhead_stable; /* the baselines' timings agreed (summary overhead_stable; 1 when absent) */
    double overhead, ideal_overhead;
    double baseline_step_ms, slowest_baseline_step_ms; /* the baselines' spread of step times */
    double peak, base_peak, efb, pred_efb, base_efb, pred_base_efb, grad, base_grad;
    double act, base_act; /* activation peak: live minus the gradients held at the time */
    struct def d;
};

struct summary_in {
    json_t *root;
    int n;
    struct rec *r;
};

/* Reads RUN_DIR/summary.json (ST_INPUT when missing or malformed); call
 * plot_summary_free whatever it returns. */
int plot_summary_load(struct summary_in *s, const char *run_dir);
void plot_summary_free(struct summary_in *s);
/* 1 for a run whose memory and time the per-case plots draw: a harness
 * reference impl other than `none`, or a run the harness does not know (a
 * Python-verified or external producer's checkpoint). */
int plot_is_measured_impl(const struct rec *r);
/* Distinct impls of the records, in order of appearance (with
 * references_only: those plot_is_measured_impl accepts); at most max. */
int plot_list_impls(const struct summary_in *s, int references_only, const char **out, int max);

/* ---- data files and gnuplot (plot_gnuplot.c) ------------------------------- */

struct plot_env {
    const char *run_dir, *scripts_dir, *gnuplot;
    char plots_dir[PATH_MAX_LEN];
    FILE *log;
    int drawn, skipped;
    int formats; /* PLOT_PNG | PLOT_SVG (plot.h) */
};

struct datafile {
    FILE *f;
    char path[PATH_MAX_LEN], tmp[PATH_MAX_LEN + 8];
};

/* A data file under plots/, written to "<name>.tmp" and renamed on close. */
int plot_data_open(struct datafile *d, const struct plot_env *env, const char *name);
int plot_data_close(struct datafile *d);
/* The program's path in out: as given when it has a '/', else the first
 * executable of that name on PATH. 0 when there is none. */
int plot_find_program(const char *name, char *out, size_t len);
/* Runs scripts/<script> with gnuplot variables `vars`, once per format of
 * env->formats (PNG, SVG), drawing plots/<name>.png and .svg. */
int plot_gnuplot_run(struct plot_env *env, const char *script, const char *name, const char *vars);
/* Pages: a plot of many cases is drawn as several images, each readable at
 * its natural size (PLOT_MAX_WIDTH pixels wide at most): "<name>.png" when
 * one page holds them all, else "<name>_1.png", "<name>_2.png", ...
 * plot_page_count: pages for n items at most per_page each;
 * plot_page_name: page p's (0-based) file name stem;
 * plot_remove_pages: what an earlier draw of `name` left (one image or
 * pages) is removed first, so no stale page is read as current. */
#define PLOT_MAX_WIDTH 2000
int plot_page_count(int n, int per_page);
void plot_page_name(char *buf, size_t len, const char *name, int page, int n_pages);
void plot_remove_pages(const struct plot_env *env, const char *name);
/* Logs that plot `name` is skipped, and why. */
void plot_skip(struct plot_env *env, const char *name, const char *why);
/* A quoted string for a data file: gnuplot reads "..." as one column. */
void plot_put_quoted(FILE *f, const char *s);

/* The unit that shows the largest value as a number of at least 1. */
struct byte_unit {
    double scale;
    const char *name;
};

struct byte_unit plot_byte_unit_for(double max_bytes);

/* A set of curves drawn alike (lines, or points only), in one data file:
 * per curve a block (its title line, then "x y" rows, then two blank
 * lines: gnuplot's index separator) and its style, handed to gnuplot as
 * word lists <name>_lc (colours), <name>_pt (point types), <name>_dt (dash
 * types), one word per block. */
struct blockset {
    struct datafile file;
    char name[16];
    int n;
    char lc[2048], pt[512], dt[512];
};

int plot_blockset_open(struct blockset *b, const struct plot_env *env, const char *var, const char *file);
/* Adds a curve (left out when it has no point; y divided by scale). */
void plot_blockset_add(struct blockset *b, const char *title, const double *x, const double *y, int n, double scale,
                       const char *colour, int pt, int dt);
/* Closes the file and appends its gnuplot variables to vars. */
int plot_blockset_close(struct blockset *b, char *vars, size_t len);
void plot_blockset_abort(struct blockset *b);

/* Colours: one per impl, the same in every plot; grey for the baseline
 * and for predictions. */
#define COLOUR_BASELINE "#424242"
#define COLOUR_PREDICTED "#9e9e9e"
const char *plot_impl_colour(const char *impl);
const char *plot_policy_colour(const char *policy);
/* Point types per group: filled for lines, open for points only. */
int plot_point_filled(int group);
int plot_point_open(int group);

/* ---- records grouped into curves (plot_curves.c) --------------------------- */

/* SWEEP_SEQ: records that differ in seq and in the selective policy
 * (one curve per policy). */
enum sweep { SWEEP_BATCH, SWEEP_SEGMENTS, SWEEP_LAYERS, SWEEP_SEQ };

enum field { F_MODEL, F_LAYERS, F_HIDDEN, F_SEQ, F_BATCH, F_HEADS, F_SEGMENTS, F_DTYPE, F_FUSION, F_AUTOCAST,
             F_DROPOUT, F_POLICY, F_COUNT };

/* segments = round(sqrt(layers)), as the case key `sqrt` resolves. */
int plot_is_sqrt_segments(const struct def *d);
/* The fields of d in `mask` (1 << enum field), less the swept ones, joined
 * with ", " ("L=16, seg=every"). */
void plot_describe(const struct def *d, enum sweep sw, unsigned mask, char *buf, size_t len);

/* Groups: records that differ only in the swept field, with at least two
 * distinct values of it. */
struct group {
    char key[256], label[256];
    int first;          /* a record of the group, for its definition */
    int n_x;
    double x[MAX_POINTS];
};

struct grouping {
    int n;
    struct group g[MAX_SERIES];
    char common[256];   /* what all groups share, for the title */
    unsigned varying;   /* fields (1 << enum field) that tell the groups apart */
};

/* Groups the records along the swept field; groups with fewer than two
 * distinct values of it are left out. */
void plot_make_groups(const struct summary_in *s, enum sweep sw, struct grouping *out);
/* Index of v in x[0..n), -1 when absent. */
int plot_find_x(const double *x, int n, double v);
/* 1 if r's definition belongs to group g. */
int plot_in_group(const struct rec *r, const struct group *g, enum sweep sw);

/* One curve: y at each x of the group (NAN where the run has none). */
struct curve {
    double y[MAX_POINTS];
    int any;
};

typedef double (*rec_value_fn)(const struct rec *r);

/* The curve of `impl` (every impl when NULL) in group g: at each x the
 * first value(r) that is not NaN, NaN where no record has one. */
void plot_collect(const struct summary_in *s, const struct group *g, enum sweep sw, const char *impl,
                  rec_value_fn value, struct curve *c);
/* "<what>, <group label>" */
void plot_series_title(char *buf, size_t len, const char *what, const struct group *g);
/* At most `max` groups, spread over the list (first, ..., last): more
 * curves than that are not readable in one plot. */
int plot_pick_groups(const struct grouping *gr, int *pick, int max);

/* ---- the model's prediction for a definition ----------------------------- */

/* Predicted bytes held at end of forward for d with `segments` (0 every,
 * SEGMENTS_NONE baseline) at `layers` and `seq`, checkpointed selectively
 * when `policy` is not ""; NAN when d names something this build does not
 * know. plot_predict (plot_curves.c): at d's own seq, not selectively.
 * plot_predict_at needs the harness's models, so each build links one of
 * two definitions: train/plot_predict_model.c (the training side: the
 * models' exact prediction) or report/plot_predict_none.c (the torch-free
 * judge: it knows no model, NAN for every definition, and the plots draw
 * the measurements without a predicted curve). */
double plot_predict_at(const struct def *d, int layers, int segments, int seq, const char *policy);
double plot_predict(const struct def *d, int layers, int segments);
/* segments of d carried to another depth: every stays every, sqrt(L)
 * follows L, a count stays (at most L). */
int plot_segments_at(const struct def *d, int layers);

/* ---- the plot families ----------------------------------------------------- */

/* Each draws one plot, or its pages (or logs it skipped):
 * plot_determinism.c, plot_memory.c, plot_per_case.c. */
int plot_determinism(struct plot_env *env, const struct summary_in *s);
int plot_peak_vs_batch(struct plot_env *env, const struct summary_in *s);
int plot_saved(struct plot_env *env, const struct summary_in *s, enum sweep sw, const char *name);
int plot_memory_vs_depth(struct plot_env *env, const struct summary_in *s);
int plot_held_vs_seq(struct plot_env *env, const struct summary_in *s);
int plot_overhead(struct plot_env *env, const struct summary_in *s);
int plot_held_per_case(struct plot_env *env, const struct summary_in *s);

#endif
