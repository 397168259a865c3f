#include "junit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "compare.h"
#include "error.h"
#include "summary_file.h"

enum outcome { OUT_PASS, OUT_FAILURE, OUT_ERROR, OUT_SKIPPED };

static enum outcome outcome_of(const json_t *rec)
{
    int v = summary_verdict(rec);
    if (summary_bool(rec, "expected"))
        return v == V_NOT_OBSERVABLE ? OUT_SKIPPED : OUT_PASS;
    return v == V_ERROR ? OUT_ERROR : OUT_FAILURE;
}

/* Length of the UTF-8 sequence at s (1 for a byte that starts none), and
 * in *ok whether XML 1.0 may carry the character. */
static int utf8_char(const unsigned char *s, int *ok)
{
    unsigned c = s[0];
    *ok = 1;
    if (c < 0x80) {
        *ok = c >= 0x20 || c == '\t' || c == '\n' || c == '\r';
        return 1;
    }
    int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    unsigned cp = n ? c & (0x7Fu >> n) : 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            n = 0; /* cut short: the lead byte alone is replaced */
        else
            cp = cp << 6 | (s[i] & 0x3Fu);
    }
    /* Not UTF-8, overlong forms, surrogates, U+FFFE/U+FFFF and beyond
     * U+10FFFF are not XML characters. */
    if (!n || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
        *ok = 0;
    return n ? n : 1;
}

/* Escapes text for element content (attr = 0) or a quoted attribute value
 * (attr = 1, where line breaks and tabs must be references or a parser
 * turns them into blanks). */
static void put_escaped(FILE *out, const char *text, int attr)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        int ok, n = utf8_char(s, &ok);
        if (!ok) {
            fputs("\xEF\xBF\xBD", out); /* U+FFFD stands in for what XML cannot hold */
            s += n;
            continue;
        }
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        case '\r': fputs("&#13;", out); break;
        case '\n': fputs(attr ? "&#10;" : "\n", out); break;
        case '\t': fputs(attr ? "&#9;" : "\t", out); break;
        default: fwrite(s, 1, (size_t)n, out); break;
        }
        s += n;
    }
}

static void put_property(FILE *out, const char *indent, const char *name, const char *value)
{
    fprintf(out, "%s<property name=\"", indent);
    put_escaped(out, name, 1);
    fputs("\" value=\"", out);
    put_escaped(out, value, 1);
    fputs("\"/>\n", out);
}

static void put_number_property(FILE *out, const char *indent, const json_t *rec, const char *key)
{
    const json_t *v = json_object_get(rec, key);
    char text[64];
    if (!v)
        return;
    if (strcmp(key, "max_scaled_ulp") == 0 && json_is_number(v))
        scaled_ulp_format(json_number_value(v), text, sizeof text); /* as the table shows it */
    else if (json_is_integer(v))
        snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(text, sizeof text, "%.6g", json_real_value(v));
    else if (json_is_null(v)) /* the summary writes NaN, inf and infinite ULP as null */
        snprintf(text, sizeof text, "%s", strstr(key, "ulp") ? "inf" : "-");
    else
        return;
    put_property(out, indent, key, text);
}

/* A list of the summary (a user's run's extra or state tensors) as one
 * property, its entries joined by "; ". */
static void put_list_property(FILE *out, const char *indent, const json_t *rec, const char *key)
{
    const json_t *list = json_object_get(rec, key), *item;
    char text[2048];
    size_t n = 0, i;
    if (!json_is_array(list) || json_array_size(list) == 0)
        return;
    text[0] = '\0';
    json_array_foreach(list, i, item)
    {
        const char *entry = json_string_value(item);
        int w = snprintf(text + n, sizeof text - n, "%s%s", i ? "; " : "", entry ? entry : "");
        if (w < 0 || (size_t)w >= sizeof text - n)
            break;
        n += (size_t)w;
    }
    put_property(out, indent, key, text);
}

/* Seconds of one record: its case's wall time over the case's records. */
static double record_seconds(const json_t *rec, const json_t *per_case)
{
    double total = summary_num(rec, "case_seconds");
    json_int_t n = json_integer_value(json_object_get(per_case, summary_str(rec, "case")));
    return isnan(total) || n <= 0 ? 0.0 : total / (double)n;
}

static void put_testcase(FILE *out, const json_t *rec, double seconds)
{
    const char *reason = summary_str(rec, "reason");
    const char *divergence = summary_str(rec, "first_divergence");
    const char *verdict = summary_str(rec, "verdict");
    int expected = summary_bool(rec, "expected");
    fputs("    <testcase classname=\"ckpt-verify.", out);
    put_escaped(out, summary_str(rec, "case"), 1);
    fputs("\" name=\"", out);
    put_escaped(out, summary_str(rec, "impl"), 1);
    fprintf(out, "\" time=\"%.3f\">\n      <properties>\n", seconds);
    put_property(out, "        ", "verdict", verdict);
    put_property(out, "        ", "expected", expected ? "true" : "false");
    /* An expected FAIL (a planted bug caught) passes, and says so the way
     * pytest's xfail does, so dashboards can tell it from a plain pass. */
    if (expected && (!strcmp(verdict, "FAIL") || !strcmp(verdict, "MEMFAIL")))
        put_property(out, "        ", "xfail", "planted bug caught as expected");
    /* the verdict's distance, and the raw element-wise one beside it */
    put_number_property(out, "        ", rec, "max_scaled_ulp");
    put_number_property(out, "        ", rec, "raw_max_ulp");
    put_number_property(out, "        ", rec, "held_cut");
    put_number_property(out, "        ", rec, "peak_cut");
    put_number_property(out, "        ", rec, "memory_saved");
    put_number_property(out, "        ", rec, "overhead");
    /* A user's run: its memory statement beside what it held, and what beyond */
    if (*summary_str(rec, "memory"))
        put_property(out, "        ", "memory", summary_str(rec, "memory"));
    put_number_property(out, "        ", rec, "judged_held_bytes");
    put_number_property(out, "        ", rec, "stated_end_forward_bytes");
    put_number_property(out, "        ", rec, "memory_step");
    put_number_property(out, "        ", rec, "recomputed_ops");
    if (*summary_str(rec, "memory_statement"))
        put_property(out, "        ", "memory_statement", summary_str(rec, "memory_statement"));
    put_list_property(out, "        ", rec, "memory_extras");
    put_list_property(out, "        ", rec, "memory_state");
    if (divergence[0])
        put_property(out, "        ", "first_divergence", divergence);
    fputs("      </properties>\n", out);
    enum outcome o = outcome_of(rec);
    if (o == OUT_FAILURE || o == OUT_ERROR) {
        const char *tag = o == OUT_ERROR ? "error" : "failure";
        fprintf(out, "      <%s message=\"", tag);
        put_escaped(out, "unexpected ", 1);
        put_escaped(out, verdict, 1);
        put_escaped(out, ": ", 1);
        put_escaped(out, reason, 1);
        fprintf(out, "\" type=\"%s\">", verdict[0] ? verdict : "ERROR");
        put_escaped(out, reason, 0);
        if (divergence[0]) {
            put_escaped(out, "\nfirst divergence: ", 0);
            put_escaped(out, divergence, 0);
        }
        fprintf(out, "</%s>\n", tag);
    } else if (o == OUT_SKIPPED) {
        fputs("      <skipped message=\"", out);
        put_escaped(out, reason, 1);
        fputs("\"/>\n", out);
    }
    fputs("      <system-out>", out);
    put_escaped(out, reason, 0);
    fputs("</system-out>\n    </testcase>\n", out);
}

/* A regression against the previous run (summary.json "regressions",
 * harness/report/regress.h): a failing testcase of its own, so a run that
 * exits 1 for it is red in the CI's report too. */
static void put_regression(FILE *out, const json_t *reg)
{
    fputs("    <testcase classname=\"ckpt-verify.regressions\" name=\"", out);
    put_escaped(out, summary_str(reg, "case"), 1);
    put_escaped(out, "/", 1);
    put_escaped(out, summary_str(reg, "impl"), 1);
    fputs("\" time=\"0.000\">\n      <failure message=\"regression against ", out);
    put_escaped(out, summary_str(reg, "against"), 1);
    put_escaped(out, ": ", 1);
    put_escaped(out, summary_str(reg, "finding"), 1);
    fputs("\" type=\"REGRESSION\">", out);
    put_escaped(out, summary_str(reg, "finding"), 0);
    fputs("</failure>\n    </testcase>\n", out);
}

int junit_render(const json_t *summary, FILE *out, struct junit_counts *counts)
{
    const json_t *records = json_object_get(summary, "records");
    struct junit_counts c = {0};
    json_t *per_case = json_object(); /* case name -> number of its records */
    if (!per_case)
        return error_set(ST_INTERNAL, "junit: out of memory");
    for (size_t i = 0; i < json_array_size(records); i++) {
        const char *name = summary_str(json_array_get(records, i), "case");
        json_object_set_new(per_case, name, json_integer(json_integer_value(json_object_get(per_case, name)) + 1));
    }
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        enum outcome o = outcome_of(rec);
        c.tests++;
        c.failures += o == OUT_FAILURE;
        c.errors += o == OUT_ERROR;
        c.skipped += o == OUT_SKIPPED;
        c.seconds += record_seconds(rec, per_case);
    }
    const json_t *regressions = json_object_get(summary, "regressions");
    c.tests += (int)json_array_size(regressions);
    c.failures += (int)json_array_size(regressions);
    const char *suite = summary_str(summary, "suite");
    char name[160];
    snprintf(name, sizeof name, "ckpt-verify%s%s", suite[0] ? "." : "", suite);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"", out);
    put_escaped(out, name, 1);
    fprintf(out, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", c.tests, c.failures,
            c.errors, c.skipped, c.seconds);
    fputs("  <testsuite name=\"", out);
    put_escaped(out, name, 1);
    fprintf(out, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\"", c.tests, c.failures,
            c.errors, c.skipped, c.seconds);
    /* Reporters read timestamp as a local date-time with no zone. */
    char stamp[32];
    snprintf(stamp, sizeof stamp, "%s", summary_str(summary, "created_utc"));
    if (stamp[0] && stamp[strlen(stamp) - 1] == 'Z')
        stamp[strlen(stamp) - 1] = '\0';
    if (stamp[0]) {
        fputs(" timestamp=\"", out);
        put_escaped(out, stamp, 1);
        fputs("\"", out);
    }
    fputs(">\n    <properties>\n", out);
    static const char *const facts[] = {"harness_version", "libtorch_version", "git_rev", "created_utc", "suite", "shard"};
    for (size_t k = 0; k < sizeof facts / sizeof *facts; k++)
        if (summary_str(summary, facts[k])[0])
            put_property(out, "      ", facts[k], summary_str(summary, facts[k]));
    fputs("    </properties>\n", out);
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        put_testcase(out, rec, record_seconds(rec, per_case));
    }
    for (size_t i = 0; i < json_array_size(regressions); i++)
        put_regression(out, json_array_get(regressions, i));
    fputs("  </testsuite>\n</testsuites>\n", out);
    json_decref(per_case);
    if (counts)
        *counts = c;
    return ferror(out) ? error_set(ST_INTERNAL, "junit: cannot write the document") : ST_OK;
}

static int render(const json_t *summary, char **text, size_t *len, struct junit_counts *counts)
{
    FILE *mem = open_memstream(text, len);
    if (!mem)
        return error_set(ST_INTERNAL, "junit: out of memory");
    int st = junit_render(summary, mem, counts);
    if (fclose(mem) != 0 && !st)
        st = error_set(ST_INTERNAL, "junit: out of memory");
    return st;
}

int junit_write(const json_t *summary, const char *dir, struct junit_counts *counts)
{
    char *text = NULL;
    size_t len = 0;
    int st = render(summary, &text, &len, counts);
    if (!st)
        st = file_write_atomic(dir, "junit.xml", text, len);
    free(text);
    return st;
}

int junit_write_with_summary(const json_t *summary, const char *dir, struct junit_counts *counts)
{
    static const char *const names[] = {"summary.json", "junit.xml"};
    char *text[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    int st = render(summary, &text[1], &len[1], counts);
    if (!st && !(text[0] = summary_file_text(summary, &len[0])))
        st = error_set(ST_INTERNAL, "%s/summary.json: cannot serialise the summary (out of memory)", dir);
    if (!st)
        st = files_write_atomic(dir, 2, names, (const char *const *)text, len);
    free(text[0]);
    free(text[1]);
    return st;
}
