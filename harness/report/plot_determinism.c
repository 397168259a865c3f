/* plot_determinism: the determinism heatmap, case × impl, coloured by
 * whether each verdict is the one the case expects and marked with the
 * verdict and its distance from baseline_0 in scaled ULP (the figure the
 * table prints). Many cases or impls are drawn as pages (plot_page_name). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "error.h"
#include "plot_internal.h"
#include "verdict_colour.h"

/* Cells are 150 x 30 pixels: 40 rows keep a page about 1500 pixels tall. */
#define CASES_PER_PAGE 40
#define CELL_WIDTH 150

/* The cell's text and colour for r. */
static void cell_of(const struct rec *r, char *figure, size_t len, const char **note, unsigned *rgb)
{
    if (r->decided_by[0])
        /* what decided it, in one word: the data file's columns are words */
        snprintf(figure, len, "%.*s", (int)strcspn(r->decided_by, " "), r->decided_by);
    else if (isnan(r->distance))
        snprintf(figure, len, "-");
    else
        scaled_ulp_format(r->distance, figure, len);
    /* A FAIL the case expects (a planted bug caught) is not a finding;
     * anything unexpected is. */
    *note = !r->expected ? "!"
            : strcmp(r->verdict, "PASS") && strcmp(r->verdict, "NOISE") && strcmp(r->verdict, "NOT_OBSERVABLE")
                ? "*"
                : "-";
    /* Colour says "as expected or not", never "good or bad": an expected
     * catch of a planted bug is not a finding, an unexpected PASS of one is
     * (verdict_colour.h, the page's table uses the same rule). */
    *rgb = verdict_colour_rgb(verdict_colour_of(r->expected, r->verdict, !isnan(r->distance), 1));
}

/* One page: cases [c0, c1) × impls [k0, k1). */
static int draw_page(struct plot_env *env, const struct summary_in *s, const char *const *cases, int c0, int c1,
                     const char *const *impls, int k0, int k1, const char *page)
{
    struct datafile d;
    char file[96];
    snprintf(file, sizeof file, "%s.dat", page);
    int st = plot_data_open(&d, env, file);
    if (st)
        return st;
    fprintf(d.f, "# impl_index case_index rgb distance verdict impl case known mark\n"
                 "# rgb: the cell colour, by whether the verdict is the one the case expects;\n"
                 "# distance: the verdict's distance from baseline_0 in scaled ULP (the largest over every\n"
                 "# tensor of max |a - b| in ULPs of its dtype at its max |a|), as the table prints it;\n"
                 "# inf: no ULP distance (NaN or Inf against a number); known = 0, '-': none measured (the\n"
                 "# run errored, or the checkpoint's own check stopped it before any gradient); a word\n"
                 "# where a FAIL was decided before any distance: missing (a tensor on one side only),\n"
                 "# dtype/shape (a tensor that cannot be compared);\n"
                 "# mark: * a bad verdict the case expects (a planted bug caught), ! an unexpected verdict,\n"
                 "# - neither\n");
    size_t longest_impl = 0, longest_case = 0;
    for (int c = c0; c < c1; c++)
        for (int k = k0; k < k1; k++) {
            const struct rec *r = NULL;
            for (int i = 0; i < s->n && !r; i++)
                if (strcmp(s->r[i].case_name, cases[c]) == 0 && strcmp(s->r[i].impl, impls[k]) == 0)
                    r = &s->r[i];
            if (!r)
                continue;
            char figure[32];
            const char *note;
            unsigned rgb;
            cell_of(r, figure, sizeof figure, &note, &rgb);
            /* short enough for a cell */
            const char *verdict = strcmp(r->verdict, "NOT_OBSERVABLE") == 0 ? "NOT_OBS" : r->verdict;
            if (strlen(impls[k]) > longest_impl)
                longest_impl = strlen(impls[k]);
            if (strlen(cases[c]) > longest_case)
                longest_case = strlen(cases[c]);
            /* rows from the top: the first case at the top */
            fprintf(d.f, "%d %d %u %s %s ", k - k0, c1 - 1 - c, rgb, figure, verdict);
            plot_put_quoted(d.f, impls[k]);
            fputc(' ', d.f);
            plot_put_quoted(d.f, cases[c]);
            fprintf(d.f, " %d %s\n", !isnan(r->distance), note);
        }
    if ((st = plot_data_close(&d)))
        return st;
    char vars[2048];
    /* Margins in character cells: the rotated impl names drop about 0.45 of
     * their length below the axis, and the legend needs three more rows. */
    snprintf(vars, sizeof vars, "data='%s'; nx=%d; ny=%d; bm=%d; lm=%d", d.path, k1 - k0, c1 - c0,
             (int)(0.45 * (double)longest_impl) + 6, (int)longest_case + 3);
    return plot_gnuplot_run(env, "plot_determinism.gp", page, vars);
}

/* 1 if some record is of case c and impl k. */
static int has_cell(const struct summary_in *s, const char *c, const char *k)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->r[i].case_name, c) == 0 && strcmp(s->r[i].impl, k) == 0)
            return 1;
    return 0;
}

int plot_determinism(struct plot_env *env, const struct summary_in *s)
{
    const char *impls[MAX_SERIES], *cases[1024];
    int n_impls = plot_list_impls(s, 0, impls, MAX_SERIES), n_cases = 0;
    size_t longest_case = 0;
    for (int i = 0; i < s->n && n_cases < 1024; i++) {
        int k = 0;
        while (k < n_cases && strcmp(cases[k], s->r[i].case_name) != 0)
            k++;
        if (k == n_cases) {
            cases[n_cases++] = s->r[i].case_name;
            if (strlen(s->r[i].case_name) > longest_case)
                longest_case = strlen(s->r[i].case_name);
        }
    }
    plot_remove_pages(env, "determinism");
    if (!n_impls) {
        plot_skip(env, "determinism", "no impl results in the summary");
        return ST_OK;
    }
    /* the width plot_determinism.gp gives a page: 8 px per margin cell */
    int impls_per_page = (PLOT_MAX_WIDTH - 60 - 8 * ((int)longest_case + 3)) / CELL_WIDTH;
    if (impls_per_page < 1)
        impls_per_page = 1;
    /* Pages of cases, as even as can be (41 cases: 21 and 20, not 40 and 1);
     * a page's columns are the impls its cases ran, split again where they
     * would be wider than a page. */
    int case_pages = plot_page_count(n_cases, CASES_PER_PAGE), cases_per_page = (n_cases + case_pages - 1) / case_pages;
    int n_page = 0, pages = 0, st = ST_OK;
    struct page {
        int n_cases, k0, k1;
        const char *cases[CASES_PER_PAGE];
        const char *impls[MAX_SERIES];
    } *plan = calloc((size_t)case_pages * MAX_SERIES, sizeof *plan);
    if (!plan)
        return error_set(ST_RUN, "out of memory for the determinism plot's pages");
    for (int cp = 0; cp < case_pages; cp++) {
        int c0 = cp * cases_per_page, c1 = c0 + cases_per_page < n_cases ? c0 + cases_per_page : n_cases, n_here = 0;
        const char *here[MAX_SERIES];
        for (int k = 0; k < n_impls; k++)
            for (int c = c0; c < c1; c++)
                if (has_cell(s, cases[c], impls[k])) {
                    here[n_here++] = impls[k];
                    break;
                }
        int impl_pages = plot_page_count(n_here, impls_per_page), per = (n_here + impl_pages - 1) / impl_pages;
        for (int ip = 0; ip < impl_pages; ip++) {
            struct page *pg = &plan[pages++];
            pg->k0 = 0;
            pg->k1 = 0;
            for (int k = ip * per; k < n_here && k < (ip + 1) * per; k++)
                pg->impls[pg->k1++] = here[k];
            /* A page's rows: the cases with a cell in its columns, so a
             * page of impls that some cases never ran has no empty rows. */
            pg->n_cases = 0;
            for (int c = c0; c < c1; c++)
                for (int k = 0; k < pg->k1; k++)
                    if (has_cell(s, cases[c], pg->impls[k])) {
                        pg->cases[pg->n_cases++] = cases[c];
                        break;
                    }
        }
    }
    for (n_page = 0; n_page < pages && !st; n_page++) {
        char name[64];
        plot_page_name(name, sizeof name, "determinism", n_page, pages);
        const struct page *pg = &plan[n_page];
        st = draw_page(env, s, pg->cases, 0, pg->n_cases, pg->impls, pg->k0, pg->k1, name);
    }
    free(plan);
    return st;
}
