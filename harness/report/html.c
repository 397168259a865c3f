/* html: report.html from a run directory's summary.json (html.h). The page
 * is built in memory, top to bottom: head (style, script), run facts,
 * counts, regressions, the verdict table, the plots, the cases
 * (html_case.c). Nothing is decided here: verdicts, distances and
 * expectations are the summary's, as the judge wrote them. */
#include "html.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "html_internal.h"
#include "html_plots.h"
#include "html_text.h"
#include "summary_file.h"
#include "verdict.h"

/* ---- the run's cases ------------------------------------------------------ */

static int run_index_cases(struct html_run *run)
{
    size_t n = json_array_size(run->records);
    run->case_of = calloc(n + 1, sizeof *run->case_of);
    run->cases = calloc(n + 1, sizeof *run->cases);
    if (!run->case_of || !run->cases)
        return error_set(ST_INTERNAL, "report.html: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *name = summary_str(json_array_get(run->records, i), "case");
        int c = 0;
        while (c < run->n_cases && strcmp(run->cases[c].name, name) != 0)
            c++;
        if (c == run->n_cases) {
            run->cases[c].name = name;
            run->cases[c].first = (int)i;
            run->n_cases++;
        }
        run->case_of[i] = c;
    }
    return ST_OK;
}

/* A record's labels from its case definition ("smoke, nightly"), as words. */
void html_labels(const json_t *rec, char *buf, size_t len)
{
    const char *labels = summary_str(json_object_get(rec, "case_definition"), "labels");
    size_t o = 0;
    buf[0] = '\0';
    while (*labels && o + 1 < len) {
        labels += strspn(labels, ", \t");
        size_t w = strcspn(labels, ", \t");
        if (!w)
            break;
        int n = snprintf(buf + o, len - o, "%s%.*s", o ? " " : "", (int)w, labels);
        if (n < 0 || (size_t)n >= len - o)
            break;
        o += (size_t)n;
        labels += w;
    }
}

/* ---- head ------------------------------------------------------------------ */

static const char page_style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1400px;padding:0 16px;"
    "color:#1a1a1a;background:#fff}\n"
    "h1{font-size:22px;margin:16px 0 4px}h2{font-size:18px;margin:24px 0 8px;border-bottom:1px solid #ddd}"
    "h3{font-size:16px;margin:20px 0 6px}h4{font-size:14px;margin:12px 0 4px}\n"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0}"
    "dl.facts dt{color:#555}dl.facts dd{margin:0}\n"
    "code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;white-space:pre-wrap;"
    "word-break:break-all}\n"
    ".bar{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0}.bar a{text-decoration:none;color:inherit}"
    ".count{padding:6px 12px;border-radius:4px;border:1px solid #ccc;font-weight:600}\n"
    ".count.unexpected{background:#b71c1c;color:#fff;border-color:#b71c1c}"
    ".count.allgood{background:#1b5e20;color:#fff;border-color:#1b5e20}\n"
    ".v-PASS{background:#e8f5e9}.v-NOISE{background:#fff8e1}.v-FAIL{background:#ffebee}"
    ".v-MEMFAIL{background:#f3e5f5}.v-ERROR{background:#fbe9e7}.v-NOT_OBSERVABLE{background:#eceff1}\n"
    "table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;"
    "vertical-align:top}th{background:#f5f5f5}\n"
    "#verdict-table th{cursor:pointer;user-select:none}#verdict-table td.num,table.tensors td.num{text-align:right;"
    "white-space:nowrap}\n"
    "tr.unexpected td:first-child{box-shadow:inset 4px 0 #b71c1c}td.no{color:#b71c1c;font-weight:700}\n"
    "td.fd{max-width:420px}form#filters{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin:6px 0}"
    "form#filters[hidden]{display:none}\n"
    "section.case{border-top:1px solid #eee;padding-top:4px}section.case:target{background:#fffde7}\n"
    ".impl{margin:8px 0 12px 12px;padding-left:10px;border-left:4px solid #ddd}"
    ".impl.v-PASS,.impl.v-NOISE,.impl.v-FAIL,.impl.v-MEMFAIL,.impl.v-ERROR,.impl.v-NOT_OBSERVABLE{background:none}\n"
    ".impl.bad{border-left-color:#b71c1c}.verdict{padding:1px 6px;border-radius:3px;font-weight:700}\n"
    "figure{margin:12px 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}"
    "figcaption{font-weight:600;margin-bottom:4px}\n"
    ".absent{color:#6d4c41;font-style:italic}.unstable{color:#e65100;font-weight:700}.outside{color:#b71c1c;"
    "font-weight:700}\n";

/* Sorting and filtering of the verdict table; the page reads whole
 * without it. Rows carry data-verdict, -case, -impl, -labels, -expected;
 * cells a data-sort number where the text is not one. */
static const char page_script[] =
    "(function(){\n"
    "var t=document.getElementById('verdict-table'),f=document.getElementById('filters');\n"
    "if(!t||!f)return;f.hidden=false;\n"
    "var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows),shown=document.getElementById('shown');\n"
    "function apply(){var v=f.elements.verdict.value,c=f.elements.casename.value.toLowerCase(),"
    "i=f.elements.impl.value.toLowerCase(),l=f.elements.label.value,n=0;\n"
    " rows.forEach(function(r){var d=r.dataset,ok=(!v||(v==='unexpected'?d.expected==='0':d.verdict===v))&&"
    "d.case.toLowerCase().indexOf(c)>=0&&d.impl.toLowerCase().indexOf(i)>=0&&"
    "(!l||(' '+d.labels+' ').indexOf(' '+l+' ')>=0);r.hidden=!ok;if(ok)n++;});\n"
    " shown.textContent=n+' of '+rows.length+' rows shown';}\n"
    "f.addEventListener('input',apply);f.addEventListener('change',apply);\n"
    "f.addEventListener('submit',function(e){e.preventDefault();});\n"
    "Array.prototype.forEach.call(document.querySelectorAll('a[data-filter]'),function(a){"
    "a.addEventListener('click',function(){f.elements.verdict.value=a.dataset.filter;apply();});});\n"
    "Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,col){th.title='sort';"
    "th.addEventListener('click',function(){var asc=th.getAttribute('aria-sort')!=='ascending';\n"
    " Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});\n"
    " th.setAttribute('aria-sort',asc?'ascending':'descending');\n"
    " function key(r){var c=r.cells[col],s=c.getAttribute('data-sort');return s!==null?parseFloat(s):"
    "c.textContent.toLowerCase();}\n"
    " rows.sort(function(a,b){var x=key(a),y=key(b),o=typeof x==='number'&&typeof y==='number'?x-y:"
    "String(x).localeCompare(String(y));return asc?o:-o;});\n"
    " rows.forEach(function(r){body.appendChild(r);});});});\n"
    "apply();\n"
    "})();\n";

static void put_head(FILE *out, const struct html_run *run)
{
    const char *suite = summary_str(run->root, "suite");
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          /* nothing leaves the page: no fetch, no font, no image but inline ones */
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>ckpt-verify",
          out);
    if (*suite) {
        fputs(" ", out);
        html_put_text(out, suite);
    }
    if (run->unexpected)
        fprintf(out, ": %d unexpected", run->unexpected);
    else
        fputs(": all verdicts as expected", out);
    fprintf(out, "</title>\n<style>\n%s", page_style);
    html_put_colour_style(out); /* the determinism plot's colours, for the table and the sections */
    fputs("</style>\n</head>\n<body>\n", out);
}

/* ---- facts and counts -------------------------------------------------------- */

static void fact(FILE *out, const char *name, const char *value)
{
    fprintf(out, "<dt>%s</dt><dd>", name);
    html_put_text(out, *value ? value : "-");
    fputs("</dd>\n", out);
}

static void put_facts(FILE *out, const struct html_run *run)
{
    const json_t *root = run->root;
    char buf[512];
    fputs("<header>\n<h1>ckpt-verify report</h1>\n<dl class=\"facts\" id=\"facts\">\n", out);
    fact(out, "suite", summary_str(root, "suite"));
    fact(out, "harness", summary_str(root, "harness_version"));
    fact(out, "git revision", summary_str(root, "git_rev"));
    snprintf(buf, sizeof buf, "%s%s%s", summary_str(root, "libtorch_version"),
             *summary_str(root, "torch_cuda") ? ", CUDA " : "", summary_str(root, "torch_cuda"));
    fact(out, "torch", buf);
    fact(out, "BLAS", summary_str(root, "blas"));
    /* the devices the cases ran on, as their definitions name them, once each */
    const char *devices[16];
    int n_dev = 0;
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(run->records) && n_dev < 16; i++) {
        const char *dev = summary_str(json_object_get(json_array_get(run->records, i), "case_definition"), "device");
        int seen = !*dev;
        for (int k = 0; k < n_dev && !seen; k++)
            seen = strcmp(devices[k], dev) == 0;
        if (seen)
            continue;
        devices[n_dev++] = dev;
        int w = snprintf(buf + o, sizeof buf - o, "%s%s", o ? ", " : "", dev);
        if (w > 0 && (size_t)w < sizeof buf - o)
            o += (size_t)w;
    }
    fact(out, "device", buf);
    fact(out, "date (UTC)", summary_str(root, "created_utc"));
    const char *shard = summary_str(root, "shard");
    if (*shard && strcmp(shard, "1/1") != 0)
        fact(out, "shard", shard);
    const json_t *from = json_object_get(root, "merged_from");
    if (json_array_size(from)) {
        snprintf(buf, sizeof buf, "%zu run directories", json_array_size(from));
        fact(out, "merged from", buf);
    }
    snprintf(buf, sizeof buf, "%d (%zu records)", run->n_cases, json_array_size(run->records));
    fact(out, "cases", buf);
    /* wall time: each case's own, summed (a case's records all carry it) */
    double wall = 0;
    int timed = 0;
    for (int c = 0; c < run->n_cases; c++) {
        double s = summary_num(json_array_get(run->records, (size_t)run->cases[c].first), "case_seconds");
        if (!isnan(s)) {
            wall += s;
            timed++;
        }
    }
    /* The command's own wall time, measured (wall_seconds: process start to
     * summary, library loading included), then the cases' own times. */
    double command = summary_num(root, "wall_seconds");
    int judged_only = !strcmp(summary_str(root, "suite"), "judge");
    size_t at = 0;
    buf[0] = '\0';
    if (!isnan(command))
        at = (size_t)snprintf(buf, sizeof buf, "%.3g s, this %s (start to summary)%s", command,
                              judged_only ? "judge" : "command",
                              judged_only ? "; the runs were trained before, by their producer" : "");
    /* "of it" only where the cases fit inside the command: records kept
     * from an earlier run in the same directory were timed by theirs. */
    if (at < sizeof buf && timed)
        snprintf(buf + at, sizeof buf - at, "%s%.3g s in %d case(s)%s", !at ? "" : wall <= command ? "; of it "
                                                                                   : "; the cases' own times: ",
                 wall, timed, timed < run->n_cases ? " (the others recorded no time)" : "");
    else if (at < sizeof buf && isnan(command))
        snprintf(buf + at, sizeof buf - at, "not recorded (judged from stored files)");
    fact(out, "wall time", buf);
    fputs("</dl>\n</header>\n", out);
}

static void put_counts(FILE *out, const struct html_run *run)
{
    int count[V_COUNT] = {0};
    for (size_t i = 0; i < json_array_size(run->records); i++) {
        int v = summary_verdict(json_array_get(run->records, i));
        if (v >= 0 && v < V_COUNT)
            count[v]++;
    }
    fputs("<section id=\"summary\">\n<div class=\"bar\" id=\"counts\">\n", out);
    if (run->unexpected)
        fprintf(out, "<a href=\"#verdicts\" data-filter=\"unexpected\" class=\"count unexpected\" "
                     "id=\"count-unexpected\">%d unexpected</a>\n", run->unexpected);
    else
        fputs("<span class=\"count allgood\" id=\"count-unexpected\">0 unexpected: all verdicts as expected</span>\n",
              out);
    if (run->n_regressions)
        fprintf(out, "<a href=\"#regressions\" class=\"count unexpected\" id=\"count-regressions\">%d "
                     "regression(s)</a>\n", run->n_regressions);
    static const enum verdict order[] = {V_PASS, V_NOISE, V_FAIL, V_MEMFAIL, V_ERROR, V_NOT_OBSERVABLE};
    for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
        enum verdict v = order[k];
        if (v == V_NOT_OBSERVABLE && !count[v])
            continue;
        fprintf(out, "<a href=\"#verdicts\" data-filter=\"%s\" class=\"count v-%s\" id=\"count-%s\">%s "
                     "<span class=\"n\">%d</span></a>\n", verdict_name(v), verdict_name(v), verdict_name(v),
                verdict_name(v), count[v]);
    }
    fputs("</div>\n</section>\n", out);
}

static void put_regressions(FILE *out, const struct html_run *run)
{
    if (!run->n_regressions)
        return;
    const json_t *list = json_object_get(run->root, "regressions");
    fprintf(out, "<section id=\"regressions\">\n<h2>Regressions against the previous run</h2>\n<p>Against ");
    html_put_text(out, summary_str(json_array_get(list, 0), "against"));
    fputs(":</p>\n<ul>\n", out);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *r = json_array_get(list, i);
        int c = html_case_index(run, summary_str(r, "case"));
        fputs("<li>", out);
        if (c >= 0)
            fprintf(out, "<a href=\"#case-%d\">", c + 1);
        html_put_text(out, summary_str(r, "case"));
        fputs(" / ", out);
        html_put_text(out, summary_str(r, "impl"));
        fputs(c >= 0 ? "</a>: " : ": ", out);
        html_put_text(out, summary_str(r, "finding"));
        fputs("</li>\n", out);
    }
    fputs("</ul>\n</section>\n", out);
}

int html_case_index(const struct html_run *run, const char *name)
{
    for (int c = 0; c < run->n_cases; c++)
        if (strcmp(run->cases[c].name, name) == 0)
            return c;
    return -1;
}

/* ---- the verdict table ---------------------------------------------------------- */

static void put_filters(FILE *out, const struct html_run *run)
{
    /* hidden until the script runs: without it the filters could do nothing */
    fputs("<form id=\"filters\" hidden>\n<label>verdict <select name=\"verdict\">"
          "<option value=\"\">all</option><option value=\"unexpected\">unexpected</option>",
          out);
    for (int v = 0; v < V_COUNT; v++)
        fprintf(out, "<option value=\"%s\">%s</option>", verdict_name((enum verdict)v),
                verdict_name((enum verdict)v));
    fputs("</select></label>\n<label>case <input name=\"casename\" type=\"search\"></label>\n"
          "<label>impl <input name=\"impl\" type=\"search\"></label>\n"
          "<label>label <select name=\"label\"><option value=\"\">all</option>",
          out);
    /* every label any record carries, once */
    char seen[4096] = " ";
    for (size_t i = 0; i < json_array_size(run->records); i++) {
        char labels[512];
        html_labels(json_array_get(run->records, i), labels, sizeof labels);
        for (char *w = strtok(labels, " "); w; w = strtok(NULL, " ")) {
            char key[80];
            snprintf(key, sizeof key, " %s ", w);
            if (strstr(seen, key) || strlen(seen) + strlen(w) + 2 >= sizeof seen)
                continue;
            strcat(seen, w);
            strcat(seen, " ");
            fputs("<option>", out);
            html_put_text(out, w);
            fputs("</option>", out);
        }
    }
    fputs("</select></label>\n<span id=\"shown\"></span>\n</form>\n", out);
}

static void put_row(FILE *out, const struct html_run *run, size_t i)
{
    const json_t *rec = json_array_get(run->records, i);
    const char *verdict = summary_str(rec, "verdict");
    int expected = html_expected(rec), c = run->case_of[i];
    char labels[512], cell[64];
    double key;
    html_labels(rec, labels, sizeof labels);
    fprintf(out, "<tr class=\"%s\" data-verdict=\"%s\" data-expected=\"%d\" data-case=\"",
            expected ? "expected" : "unexpected", verdict, expected);
    html_put_text(out, summary_str(rec, "case"));
    fputs("\" data-impl=\"", out);
    html_put_text(out, summary_str(rec, "impl"));
    fputs("\" data-labels=\"", out);
    html_put_text(out, labels);
    fprintf(out, "\"><td data-sort=\"%d\"><a href=\"#case-%d\">", c, c + 1);
    html_put_text(out, summary_str(rec, "case"));
    fputs("</a></td><td>", out);
    html_put_text(out, summary_str(rec, "impl"));
    /* Coloured as the determinism plot colours it: by expectation. */
    char title[160];
    fprintf(out, "</td><td class=\"v-%s %s\" title=\"%s\">%s</td><td class=\"%s\">%s</td>", verdict,
            verdict_colour_class(html_colour(rec)), html_expectation(rec, title, sizeof title),
            html_verdict_word(rec), expected ? "" : "no", expected ? "yes" : "NO");
    html_distance(rec, cell, sizeof cell, &key);
    fprintf(out, "<td class=\"num\" data-sort=\"%.17g\">%s</td>", isinf(key) ? 1e308 : key, cell);
    static const char *const cuts[] = {"held_cut", "peak_cut"};
    for (int k = 0; k < 2; k++) {
        double v = summary_num(rec, cuts[k]);
        fprintf(out, "<td class=\"num\" data-sort=\"%.17g\">%s</td>", isnan(v) ? -1e308 : v,
                html_percent(v, cell, sizeof cell));
    }
    double over = summary_num(rec, "overhead");
    fprintf(out, "<td class=\"num\" data-sort=\"%.17g\">%s</td><td>", isnan(over) ? -1e308 : over,
            html_overhead(rec, cell, sizeof cell));
    html_put_text(out, labels);
    fputs("</td><td class=\"fd mono\">", out);
    html_put_text(out, summary_str(rec, "first_divergence"));
    fputs("</td></tr>\n", out);
}

static void put_table(FILE *out, const struct html_run *run)
{
    fputs("<section id=\"verdicts\">\n<h2>Verdicts</h2>\n<p>One row per case and impl, unexpected verdicts first. "
          "&quot;ok&quot;: the verdict is one the case expects (a planted bug is expected to FAIL). Scaled ULP: the "
          "verdict's distance from baseline_0 at each tensor's scale; held / peak cut: bytes held at the end of "
          "forward and the step's peak, against the baseline; overhead: step time against the fastest baseline, "
          "<span class=\"unstable\">?</span> where the baselines' own times disagree.</p>\n",
          out);
    put_filters(out, run);
    fputs("<table id=\"verdict-table\">\n<thead><tr><th>case</th><th>impl</th><th>verdict</th><th>ok</th>"
          "<th>scaled ULP</th><th>held cut</th><th>peak cut</th><th>overhead</th><th>labels</th>"
          "<th>first divergence</th></tr></thead>\n<tbody>\n",
          out);
    size_t n = json_array_size(run->records);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if (html_expected(json_array_get(run->records, i)) == pass)
                put_row(out, run, i);
    fputs("</tbody>\n</table>\n</section>\n", out);
}

/* ---- plots -------------------------------------------------------------------------- */

static void put_plots(FILE *out, const struct html_plots *plots)
{
    fputs("<section id=\"plots\">\n<h2>Plots</h2>\n", out);
    if (plots->why[0]) {
        fputs("<p class=\"absent\" id=\"plots-absent\">", out);
        /* "plots not drawn: gnuplot did not finish in N s" says itself what is absent. */
        int says = strncmp(plots->why, "plots not drawn", 15) == 0;
        fputs(says ? "P" : plots->n ? "Some plots are absent: " : "Plots absent: ", out);
        html_put_text(out, says ? plots->why + 1 : plots->why);
        fputs("</p>\n", out);
    }
    for (int i = 0; i < plots->n; i++) {
        fprintf(out, "<figure id=\"plot-%s\"><figcaption>%s</figcaption>\n", plots->p[i].name, plots->p[i].name);
        fwrite(plots->p[i].svg, 1, plots->p[i].len, out);
        fputs("</figure>\n", out);
    }
    fputs("</section>\n", out);
}

/* The plots not drawn for lack of data: a list that says nothing about the
 * run's verdicts, so it comes last on the page, folded. */
static void put_plots_not_drawn(FILE *out, const struct html_plots *plots)
{
    if (!plots->skipped || !*plots->skipped)
        return;
    int n = 0;
    for (const char *p = plots->skipped; *p; p++)
        n += *p == '\n' || !p[1];
    fprintf(out, "<section id=\"plots-not-drawn\">\n<details><summary>%d plot(s) not drawn, for lack of data in "
                 "this run</summary>\n<ul class=\"mono\">\n", n);
    for (const char *line = plots->skipped; *line;) {
        size_t len = strcspn(line, "\n");
        fputs("<li>", out);
        html_put_textn(out, line, len);
        fputs("</li>\n", out);
        line += len + (line[len] == '\n');
    }
    fputs("</ul>\n</details>\n</section>\n", out);
}

/* ---- the page ------------------------------------------------------------------------- */

int html_write_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot)
{
    struct html_run run;
    memset(&run, 0, sizeof run);
    int st = summary_file_load(run_dir, &run.root);
    if (st)
        return st;
    run.records = json_object_get(run.root, "records");
    run.n_regressions = (int)json_array_size(json_object_get(run.root, "regressions"));
    for (size_t i = 0; i < json_array_size(run.records); i++)
        run.unexpected += !html_expected(json_array_get(run.records, i));
    if ((st = run_index_cases(&run))) {
        html_run_free(&run);
        return st;
    }
    struct html_plots plots;
    html_plots_draw(run_dir, scripts_dir, gnuplot, &plots);
    run.plots = &plots;
    char *page = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&page, &len);
    if (!out) {
        html_plots_free(&plots);
        html_run_free(&run);
        return error_set(ST_INTERNAL, "report.html: out of memory");
    }
    put_head(out, &run);
    put_facts(out, &run);
    put_counts(out, &run);
    put_regressions(out, &run);
    put_table(out, &run);
    put_plots(out, &plots);
    html_put_cases(out, &run);
    put_plots_not_drawn(out, &plots);
    fprintf(out, "<footer><p>Written by ckpt-verify from %s/summary.json; every figure on this page is the "
                 "summary's, as the judge recorded it.</p></footer>\n<script>\n%s</script>\n</body>\n</html>\n",
            "this run directory's", page_script);
    int bad = fclose(out) != 0;
    st = bad ? error_set(ST_INTERNAL, "report.html: out of memory")
             : file_write_atomic(run_dir, "report.html", page, len);
    free(page);
    html_plots_free(&plots);
    html_run_free(&run);
    return st;
}

void html_run_free(struct html_run *run)
{
    json_decref(run->root);
    free(run->case_of);
    free(run->cases);
    memset(run, 0, sizeof *run);
}
