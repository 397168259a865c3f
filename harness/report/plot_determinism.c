/* plot_determinism: the determinism heatmap, case × impl, coloured by the
 * largest ULP distance from baseline_0 and marked with each verdict. */
#include <math.h>
#include <string.h>

#include "error.h"
#include "plot_internal.h"

int plot_determinism(struct plot_env *env, const struct summary_in *s)
{
    const char *impls[MAX_SERIES], *cases[1024];
    int n_impls = plot_list_impls(s, 0, impls, MAX_SERIES), n_cases = 0;
    for (int i = 0; i < s->n && n_cases < 1024; i++) {
        int k = 0;
        while (k < n_cases && strcmp(cases[k], s->r[i].case_name) != 0)
            k++;
        if (k == n_cases)
            cases[n_cases++] = s->r[i].case_name;
    }
    if (!n_impls) {
        plot_skip(env, "determinism", "no impl results in the summary");
        return ST_OK;
    }
    struct datafile d;
    int st = plot_data_open(&d, env, "determinism.dat");
    if (st)
        return st;
    fprintf(d.f, "# impl_index case_index rgb max_ulp verdict impl case known mark\n"
                 "# rgb: the cell colour, by whether the verdict is the one the case expects;\n"
                 "# max_ulp: ULP distance to baseline_0 over every recorded tensor; inf: no ULP distance\n"
                 "# (NaN or Inf against a number); known = 0: no figure (the run errored, or the\n"
                 "# checkpoint's own check stopped it before any gradient); mark: * a bad verdict the\n"
                 "# case expects (a planted bug caught), ! an unexpected verdict, - neither\n");
    size_t longest_impl = 0, longest_case = 0;
    for (int c = 0; c < n_cases; c++)
        for (int k = 0; k < n_impls; k++) {
            const struct rec *r = NULL;
            for (int i = 0; i < s->n && !r; i++)
                if (strcmp(s->r[i].case_name, cases[c]) == 0 && strcmp(s->r[i].impl, impls[k]) == 0)
                    r = &s->r[i];
            if (!r)
                continue;
            /* A FAIL or ERROR with no divergence recorded was stopped before
             * its gradients existed (the checkpoint's own check): no figure. */
            int stopped = (!strcmp(r->verdict, "FAIL") || !strcmp(r->verdict, "ERROR")) && r->ulp == 0;
            int known = r->has_ulp && !stopped;
            char ulp[32];
            /* The distance at the tensor's scale where the summary has it:
             * raw ULPs of elements crossing zero are ~2^31 for noise too. */
            double at_scale = r->ulp == 0 ? 0 : r->scaled;
            if (!known)
                snprintf(ulp, sizeof ulp, "-");
            else if (!isnan(at_scale))
                snprintf(ulp, sizeof ulp, isinf(at_scale) ? "inf" : at_scale >= 1e5 ? "%.1e" : "%.3g", at_scale);
            else if (isinf(r->ulp))
                snprintf(ulp, sizeof ulp, "inf");
            else if (r->ulp >= 1e5)
                snprintf(ulp, sizeof ulp, "%.1e", r->ulp);
            else
                snprintf(ulp, sizeof ulp, "%.0f", r->ulp);
            /* A FAIL the case expects (a planted bug caught) is not a finding;
             * anything unexpected is. */
            const char *note = !r->expected ? "!"
                               : strcmp(r->verdict, "PASS") && strcmp(r->verdict, "NOISE") &&
                                         strcmp(r->verdict, "NOT_OBSERVABLE")
                                   ? "*"
                                   : "-";
            /* short enough for a cell */
            const char *verdict = strcmp(r->verdict, "NOT_OBSERVABLE") == 0 ? "NOT_OBS" : r->verdict;
            /* Colour says "as expected or not", never "good or bad": an
             * expected catch of a planted bug is not a finding, an
             * unexpected PASS of one is. */
            unsigned rgb = !r->expected                                 ? 0xef5350u
                           : note[0] == '*'                              ? 0x90caf9u
                           : !known || !strcmp(r->verdict, "NOT_OBSERVABLE") ? 0xdededeu
                                                                         : 0xa5d6a7u;
            if (strlen(impls[k]) > longest_impl)
                longest_impl = strlen(impls[k]);
            if (strlen(cases[c]) > longest_case)
                longest_case = strlen(cases[c]);
            /* rows from the top: the first case at the top */
            fprintf(d.f, "%d %d %u %s %s ", k, n_cases - 1 - c, rgb, ulp, verdict);
            plot_put_quoted(d.f, impls[k]);
            fputc(' ', d.f);
            plot_put_quoted(d.f, cases[c]);
            fprintf(d.f, " %d %s\n", known, note);
        }
    if ((st = plot_data_close(&d)))
        return st;
    char vars[2048];
    /* Margins in character cells: the rotated impl names drop about 0.6 of
     * their length below the axis; the legend needs two more rows. */
    snprintf(vars, sizeof vars, "data='%s'; nx=%d; ny=%d; bm=%d; lm=%d", d.path, n_impls, n_cases,
             (int)(0.45 * (double)longest_impl) + 4, (int)longest_case + 3);
    return plot_gnuplot_run(env, "plot_determinism.gp", "determinism", vars);
}

