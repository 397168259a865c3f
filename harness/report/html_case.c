/* html_case: report.html's section per case (html_internal.h): the case
 * definition, then per impl its verdict, reason, first divergence (as the
 * summary states it, and split into step, tensor, index and values), the
 * bytes held and the peak against the prediction and the baseline, the
 * overhead with its stability, the regressions a --compare-to found, and
 * the per-tensor distances the judge recorded; last, the plots that show
 * the case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"
#include "html_plots.h"
#include "html_text.h"
#include "summary_file.h"

/* A first divergence as the judge words it (judge.c describe_tensor):
 * "[RUN: ]steps/K/grads/NAME [i, j] (A vs B; N of M elements differ)", or
 * "PATH: why", or "PATH missing in RUN". Fields not found stay "". */
struct divergence {
    char run[64], step[16], tensor[256], index[96], values[160];
};

static void parse_divergence(const char *s, struct divergence *d)
{
    memset(d, 0, sizeof *d);
    /* a re-run's name first: a word with no '/' before ": " */
    size_t head = strcspn(s, ":/ ");
    if (s[head] == ':' && s[head + 1] == ' ' && head < sizeof d->run) {
        snprintf(d->run, sizeof d->run, "%.*s", (int)head, s);
        s += head + 2;
    }
    size_t path = strcspn(s, " :");
    const char *p = s;
    if (strncmp(p, "steps/", 6) == 0) {
        size_t k = strspn(p + 6, "0123456789");
        if (k && p[6 + k] == '/' && k < sizeof d->step) {
            snprintf(d->step, sizeof d->step, "%.*s", (int)k, p + 6);
            p += 6 + k + 1;
        }
    }
    snprintf(d->tensor, sizeof d->tensor, "%.*s", (int)(s + path - p), p);
    s += path;
    if (s[0] == ' ' && s[1] == '[') {
        size_t n = strcspn(s + 1, "]");
        if (s[1 + n] == ']') {
            snprintf(d->index, sizeof d->index, "%.*s", (int)n + 1, s + 1);
            s += n + 2;
        }
    }
    if (s[0] == ' ' && s[1] == '(') {
        size_t n = strcspn(s + 2, ";)");
        snprintf(d->values, sizeof d->values, "%.*s", (int)n, s + 2);
    } else if (s[0] == ' ' && s[1] == '=') {
        snprintf(d->values, sizeof d->values, "%s", s + 1);
    }
}

static void row(FILE *out, const char *name, const char *value, const char *cls)
{
    fprintf(out, "<dt>%s</dt><dd%s%s%s>", name, cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
    html_put_text(out, value);
    fputs("</dd>\n", out);
}

static void put_definition(FILE *out, const json_t *rec)
{
    const json_t *def = json_object_get(rec, "case_definition");
    if (!json_object_size(def)) {
        fputs("<p>No case definition recorded (another producer's file without /case).</p>\n", out);
        return;
    }
    fputs("<details class=\"definition\" open><summary>case definition</summary>\n<table class=\"definition\">"
          "<tbody>\n",
          out);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)def, key, v)
    {
        fputs("<tr><th>", out);
        html_put_text(out, key);
        fputs("</th><td class=\"mono\">", out);
        if (json_is_string(v))
            html_put_text(out, json_string_value(v));
        else if (json_is_integer(v))
            fprintf(out, "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
            fprintf(out, "%.10g", json_real_value(v));
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody></table>\n</details>\n", out);
}

static void put_divergence(FILE *out, const json_t *rec)
{
    const char *fd = summary_str(rec, "first_divergence");
    if (!*fd) {
        /* What was compared, as the judge says it: a PASS's reason counts
         * the tensors it found bitwise identical. */
        const char *verdict = summary_str(rec, "verdict"), *reason = summary_str(rec, "reason");
        char text[1024];
        size_t n = strcspn(reason, ";[");
        while (n > 0 && reason[n - 1] == ' ') /* before a bracketed note: no trailing space */
            n--;
        if (!strcmp(verdict, "PASS") && !strncmp(reason, "bitwise identical to ", 21))
            snprintf(text, sizeof text, "none: %.*s", (int)n, reason);
        else if (!strcmp(verdict, "ERROR"))
            snprintf(text, sizeof text, "none: the run did not complete, so nothing was compared (the reason says "
                                        "why)");
        else
            snprintf(text, sizeof text, "none recorded");
        row(out, "first divergence", text, NULL);
        return;
    }
    fputs("<dt>first divergence</dt><dd><code class=\"first-divergence\">", out);
    html_put_text(out, fd);
    fputs("</code>", out);
    struct divergence d;
    parse_divergence(fd, &d);
    if (d.tensor[0]) {
        fputs("<table class=\"divergence\"><tbody>\n", out);
        const char *const names[] = {"in run", "step", "tensor", "index", "values"};
        const char *const values[] = {d.run, d.step, d.tensor, d.index, d.values};
        for (int k = 0; k < 5; k++)
            if (values[k][0]) {
                fprintf(out, "<tr><th>%s</th><td class=\"mono fd-%s\">", names[k], k == 0 ? "run" : names[k]);
                html_put_text(out, values[k]);
                fputs("</td></tr>\n", out);
            }
        fputs("</tbody></table>", out);
    }
    fputs("</dd>\n", out);
}

/* A list of the summary (a user's run's extras or state) as one row. */
static void put_tensor_list(FILE *out, const json_t *rec, const char *key, const char *label)
{
    const json_t *list = json_object_get(rec, key), *item;
    char line[2048];
    size_t n = 0, i;
    if (!json_is_array(list) || json_array_size(list) == 0)
        return;
    line[0] = '\0';
    json_array_foreach(list, i, item)
    {
        int w = snprintf(line + n, sizeof line - n, "%s%s", i ? "; " : "",
                         json_string_value(item) ? json_string_value(item) : "");
        if (w < 0 || (size_t)w >= sizeof line - n)
            break;
        n += (size_t)w;
    }
    row(out, label, line, NULL);
}

/* A user's run (python/ckpt_verify): held beside its statement on the
 * judged step, the recomputed ops, and the tensors beyond its baseline;
 * or why its memory was not judged. 1 when it is one. */
static int put_user_memory(FILE *out, const json_t *rec)
{
    const char *memory = summary_str(rec, "memory");
    char a[32], b[32], c[32], d[32], line[256];
    if (!memory[0] || strcmp(memory, "control") == 0)
        return 0;
    if (strcmp(memory, "judged") != 0) {
        row(out, "memory", memory, "held");
        return 1;
    }
    double held = summary_num(rec, "judged_held_bytes"), stated = summary_num(rec, "stated_end_forward_bytes");
    const json_t *step = json_object_get(rec, "memory_step"), *ops = json_object_get(rec, "recomputed_ops");
    snprintf(line, sizeof line, "%s, stated %s (step %lld, %+.0f B); baseline %s; held cut %s",
             html_bytes(held, a, sizeof a), html_bytes(stated, b, sizeof b), (long long)json_integer_value(step), held - stated,
             html_bytes(summary_num(rec, "baseline_end_forward_bytes"), c, sizeof c),
             html_percent(summary_num(rec, "held_cut"), d, sizeof d));
    row(out, "held at end of forward", line, "held");
    snprintf(line, sizeof line, "%lld", (long long)json_integer_value(ops));
    row(out, "recomputed ops", line, NULL);
    row(out, "statement", summary_str(rec, "memory_statement"), NULL);
    put_tensor_list(out, rec, "memory_extras", "extras");
    put_tensor_list(out, rec, "memory_state", "state");
    return 1;
}

static void put_held(FILE *out, const json_t *rec)
{
    char a[32], b[32], c[32], d[32], line[256];
    double held = summary_num(rec, "end_forward_bytes"), pred = summary_num(rec, "predicted_end_forward_bytes");
    int n = snprintf(line, sizeof line, "%s (predicted %s", html_bytes(held, a, sizeof a),
                     html_bytes(pred, b, sizeof b));
    if (pred > 0 && !isnan(held) && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ", %+.1f%% off", 100.0 * (held - pred) / pred);
    if (n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, "); baseline %s (predicted %s); held cut %s",
                 html_bytes(summary_num(rec, "baseline_end_forward_bytes"), c, sizeof c),
                 html_bytes(summary_num(rec, "predicted_baseline_end_forward_bytes"), d, sizeof d),
                 html_percent(summary_num(rec, "held_cut"), a, sizeof a));
    row(out, "held at end of forward", line, "held");
}

static void put_memory(FILE *out, const json_t *rec)
{
    char a[32], b[32], c[32], line[256];
    if (!put_user_memory(out, rec))
        put_held(out, rec);
    snprintf(line, sizeof line, "%s; baseline %s; peak cut %s", html_bytes(summary_num(rec, "peak_bytes"), a, sizeof a),
             html_bytes(summary_num(rec, "baseline_peak_bytes"), b, sizeof b),
             html_percent(summary_num(rec, "peak_cut"), c, sizeof c));
    row(out, "peak", line, "peak");
    double one_time = summary_num(rec, "one_time_bytes");
    if (one_time > 0) {
        snprintf(line, sizeof line, "%s left allocated by the warm-up (library workspaces), kept out of every figure",
                 html_bytes(one_time, a, sizeof a));
        row(out, "warm-up", line, NULL);
    }
}

static void put_overhead(FILE *out, const json_t *rec)
{
    char a[32], line[320];
    double ideal = summary_num(rec, "ideal_overhead"), fast = summary_num(rec, "baseline_step_ms"),
           slow = summary_num(rec, "slowest_baseline_step_ms");
    const json_t *stable = json_object_get(rec, "overhead_stable");
    int n = snprintf(line, sizeof line, "%s", html_overhead(rec, a, sizeof a));
    if (!isnan(ideal) && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " (recomputing every layer once: %.2fx)", ideal);
    if (!isnan(fast) && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "; step %.3g ms against the fastest baseline's %.3g ms",
                      summary_num(rec, "step_ms"), fast);
    if (!isnan(slow) && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " (slowest %.3g ms)", slow);
    row(out, "overhead", line, "overhead");
    if (stable && json_is_false(stable) && !isnan(summary_num(rec, "overhead")))
        row(out, "", "? unstable: the baselines' own step times differ by more than the judge allows; this ratio "
                     "is not a measurement to compare",
            "unstable");
}

static void put_regressions(FILE *out, const struct html_run *run, const json_t *rec)
{
    const json_t *list = json_object_get(run->root, "regressions");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *r = json_array_get(list, i);
        if (strcmp(summary_str(r, "case"), summary_str(rec, "case")) != 0 ||
            strcmp(summary_str(r, "impl"), summary_str(rec, "impl")) != 0)
            continue;
        row(out, "regression", summary_str(r, "finding"), "outside");
    }
}

/* The judge's per-tensor distances (summary.json tensor_distances,
 * docs/schema.md), farthest first, as recorded: nothing recomputed. */
static void put_tensors(FILE *out, const json_t *rec)
{
    const json_t *list = json_object_get(rec, "tensor_distances");
    const char *verdict = summary_str(rec, "verdict");
    int differing = (int)json_integer_value(json_object_get(rec, "tensors_differing"));
    if (!json_array_size(list)) {
        if (strcmp(verdict, "FAIL") == 0 || strcmp(verdict, "NOISE") == 0)
            fputs("<p class=\"absent tensors-absent\">No per-tensor distances recorded: the judge measured none "
                  "(a tensor missing or of another shape, a run check) or this summary predates them.</p>\n",
                  out);
        return;
    }
    fprintf(out, "<p>Distances per tensor and step from baseline_0, in scaled ULP (an integer tensor's: the "
                 "difference of its values, marked \"values\"), farthest first: %zu of %d "
                 "differing tensor(s)%s.</p>\n",
            json_array_size(list), differing,
            (int)json_array_size(list) < differing ? " (the nearest left out)" : "");
    fputs("<table class=\"tensors\"><thead><tr><th>step</th><th>tensor</th><th>distance</th><th>baselines' "
          "spread</th><th>limit</th><th></th></tr></thead><tbody>\n",
          out);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *t = json_array_get(list, i);
        const char *path = summary_str(t, "tensor");
        struct divergence d;
        parse_divergence(path, &d);
        const json_t *dist = json_object_get(t, "scaled_ulp"), *limit = json_object_get(t, "limit");
        double dv = json_is_null(dist) ? INFINITY : summary_num(t, "scaled_ulp");
        double lv = json_is_null(limit) ? INFINITY : summary_num(t, "limit");
        double spread = summary_num(t, "spread");
        fputs("<tr><td class=\"num\">", out);
        html_put_text(out, d.step[0] ? d.step : "-");
        fputs("</td><td class=\"mono\">", out);
        html_put_text(out, d.step[0] ? d.tensor : path);
        char dbuf[32], sbuf[32], lbuf[64];
        if (json_is_true(json_object_get(t, "values")))
            snprintf(dbuf, sizeof dbuf, "%.0f values", dv);
        else
            snprintf(dbuf, sizeof dbuf, isinf(dv) ? "inf" : "%.3g", dv);
        snprintf(sbuf, sizeof sbuf, isnan(spread) ? "-" : isinf(spread) ? "inf" : "%.3g", spread);
        if (lv == 0)
            snprintf(lbuf, sizeof lbuf, "bitwise");
        else if (isinf(lv))
            snprintf(lbuf, sizeof lbuf, "none");
        else
            snprintf(lbuf, sizeof lbuf, "%.3g", lv);
        int outside = dv > lv;
        fprintf(out, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td%s>%s</td>"
                     "</tr>\n",
                dbuf, sbuf, lbuf, outside ? " class=\"outside\"" : "", outside ? "outside" : "within");
    }
    fputs("</tbody></table>\n", out);
}

static void put_impl(FILE *out, const struct html_run *run, size_t i, int c, int k)
{
    const json_t *rec = json_array_get(run->records, i);
    const char *verdict = summary_str(rec, "verdict");
    int expected = html_expected(rec);
    fprintf(out, "<div class=\"impl v-%s%s\" id=\"case-%d-impl-%d\">\n<h4>", verdict, expected ? "" : " bad", c + 1,
            k + 1);
    html_put_text(out, summary_str(rec, "impl"));
    char wanted[160];
    html_expectation(rec, wanted, sizeof wanted);
    fprintf(out, " <span class=\"verdict v-%s %s\">%s</span> %s", verdict, verdict_colour_class(html_colour(rec)),
            html_verdict_word(rec), expected ? "" : "<span class=\"outside\">");
    html_put_text(out, wanted);
    fprintf(out, "%s</h4>\n<dl class=\"facts\">\n", expected ? "" : "</span>");
    row(out, "reason", summary_str(rec, "reason"), "reason");
    if (*summary_str(rec, "judged_verdict"))
        row(out, "judged", summary_str(rec, "judged_verdict"), NULL);
    char buf[64];
    double key;
    row(out, "scaled ULP", html_distance(rec, buf, sizeof buf, &key), NULL);
    put_divergence(out, rec);
    put_memory(out, rec);
    put_overhead(out, rec);
    const json_t *rc = json_object_get(rec, "recomputes");
    if (rc) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(rc));
        row(out, "recomputes", buf, NULL);
    }
    put_regressions(out, run, rec);
    fputs("</dl>\n", out);
    put_tensors(out, rec);
    fputs("</div>\n", out);
}

/* The plots whose drawing names the case (a tick label or a title). */
static void put_case_plots(FILE *out, const struct html_run *run, const char *name)
{
    const struct html_plots *plots = run->plots;
    char needle[512], text[480];
    html_svg_text(text, sizeof text, name);
    snprintf(needle, sizeof needle, ">%s<", text);
    int any = 0;
    for (int p = 0; p < plots->n; p++)
        if (strstr(plots->p[p].svg, needle)) {
            fprintf(out, "%s<a href=\"#plot-%s\">%s</a>", any ? ", " : "<p class=\"case-plots\">Plots showing "
                                                                        "this case: ",
                    plots->p[p].name, plots->p[p].name);
            any = 1;
        }
    if (any)
        fputs("</p>\n", out);
    else
        fputs(plots->n ? "<p class=\"case-plots\">No plot names this case by itself; see <a href=\"#plots\">the "
                         "plots</a> for the sweeps it belongs to.</p>\n"
                       : "<p class=\"case-plots absent\">No plots: see <a href=\"#plots\">Plots</a> for why.</p>\n",
              out);
}

void html_put_cases(FILE *out, const struct html_run *run)
{
    fputs("<section id=\"cases\">\n<h2>Cases</h2>\n", out);
    for (int c = 0; c < run->n_cases; c++) {
        const json_t *first = json_array_get(run->records, (size_t)run->cases[c].first);
        fprintf(out, "<section class=\"case\" id=\"case-%d\">\n<h3>", c + 1);
        html_put_text(out, run->cases[c].name);
        fputs("</h3>\n<p>", out);
        double noise = summary_num(first, "noise_floor_scaled_ulp");
        const json_t *runs = json_object_get(first, "baseline_runs");
        if (runs)
            fprintf(out, "%lld baseline run(s); noise between them: ", (long long)json_integer_value(runs));
        if (isnan(noise))
            fputs("unmeasured", out);
        else if (noise == 0)
            fputs("bitwise identical", out);
        else
            fprintf(out, "up to %.3g scaled ULP", noise);
        const char *h5 = summary_str(first, "h5");
        if (*h5) {
            fputs("; report file <code>", out);
            html_put_text(out, h5);
            fputs("</code>", out);
        }
        fputs("</p>\n", out);
        put_definition(out, first);
        int k = 0;
        for (size_t i = 0; i < json_array_size(run->records); i++)
            if (run->case_of[i] == c)
                put_impl(out, run, i, c, k++);
        put_case_plots(out, run, run->cases[c].name);
        fputs("</section>\n", out);
    }
    fputs("</section>\n", out);
}
