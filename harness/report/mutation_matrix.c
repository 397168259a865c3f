#include "mutation_matrix.h"

#include <jansson.h>
#include <string.h>

#include "run_record.h"

#define MATRIX_MAX_CASES 64
#define MATRIX_MAX_BUGS 128
#define CELL_WIDTH 6

/* A record of a run its producer recorded as a planted bug (summary "role"). */
static int is_planted(const json_t *rec)
{
    const char *role = json_string_value(json_object_get(rec, "role"));
    return role && strcmp(role, RUN_ROLE_PLANTED_BUG) == 0;
}

/* Short enough that a dozen cases fit a terminal. */
static const char *cell_text(const char *verdict)
{
    static const char *const map[][2] = {{"PASS", "PASS"},    {"NOISE", "NOISE"}, {"FAIL", "FAIL"},
                                         {"MEMFAIL", "MEMF"}, {"ERROR", "ERR"},   {"NOT_OBSERVABLE", "n/o"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(verdict, map[i][0]) == 0)
            return map[i][1];
    return "?";
}

/* The record of (case, impl), or NULL. */
static json_t *find_record(json_t *records, const char *case_name, const char *impl)
{
    size_t i;
    json_t *rec;
    json_array_foreach(records, i, rec)
    {
        const char *c = json_string_value(json_object_get(rec, "case"));
        const char *m = json_string_value(json_object_get(rec, "impl"));
        if (c && m && strcmp(c, case_name) == 0 && strcmp(m, impl) == 0)
            return rec;
    }
    return NULL;
}

void mutation_matrix_print(FILE *out, const struct json_t *summary)
{
    json_t *records = json_object_get(summary, "records");
    const char *cases[MATRIX_MAX_CASES], *bugs[MATRIX_MAX_BUGS];
    int n_cases = 0, more_cases = 0, unexpected = 0, n_bugs = 0;
    size_t i;
    json_t *rec;
    /* Columns: the cases that ran a planted bug, in run order; rows: the
     * planted bugs, in the order they first ran. */
    json_array_foreach(records, i, rec)
    {
        const char *c = json_string_value(json_object_get(rec, "case"));
        const char *m = json_string_value(json_object_get(rec, "impl"));
        if (!c || !m || !is_planted(rec))
            continue;
        int known = 0;
        for (int k = 0; k < n_bugs && !known; k++)
            known = strcmp(bugs[k], m) == 0;
        if (!known && n_bugs < MATRIX_MAX_BUGS)
            bugs[n_bugs++] = m;
        int seen = 0;
        for (int k = 0; k < n_cases && !seen; k++)
            seen = strcmp(cases[k], c) == 0;
        if (seen)
            continue;
        if (n_cases == MATRIX_MAX_CASES)
            more_cases = 1;
        else
            cases[n_cases++] = c;
    }
    if (n_cases < 1)
        return;
    fprintf(out, "\nplanted bug x case  (FAIL/MEMF: caught; n/o: cannot show there; PASS: missed; "
                 "!: not the expected verdict; .: not run)\n");
    fprintf(out, "  %-26s", "");
    for (int k = 0; k < n_cases; k++)
        fprintf(out, "%*d", CELL_WIDTH, k + 1);
    fprintf(out, "\n");
    for (int b = 0; b < n_bugs; b++) {
        char line[26 + CELL_WIDTH * MATRIX_MAX_CASES + 8];
        int any = 0, off = snprintf(line, sizeof line, "  %-26s", bugs[b]);
        for (int k = 0; k < n_cases; k++) {
            json_t *r = find_record(records, cases[k], bugs[b]);
            char cell[16];
            if (!r) {
                snprintf(cell, sizeof cell, ".");
            } else {
                int ok = json_is_true(json_object_get(r, "expected"));
                const char *v = json_string_value(json_object_get(r, "verdict"));
                snprintf(cell, sizeof cell, "%s%s", cell_text(v ? v : ""), ok ? "" : "!");
                unexpected += !ok;
                any = 1;
            }
            if ((size_t)off < sizeof line)
                off += snprintf(line + off, sizeof line - (size_t)off, "%*s", CELL_WIDTH, cell);
        }
        if (any)
            fprintf(out, "%s\n", line);
    }
    /* The legend, three cases a line. */
    for (int k = 0; k < n_cases; k++) {
        int last_in_line = k % 3 == 2 || k == n_cases - 1;
        fprintf(out, "%s%2d %-*s%s", k % 3 ? "" : k ? "         " : "  cases: ", k + 1, last_in_line ? 0 : 26,
                cases[k], last_in_line ? "\n" : " ");
    }
    if (more_cases)
        fprintf(out, "  (only the first %d cases are shown)\n", MATRIX_MAX_CASES);
    if (unexpected)
        fprintf(out, "  %d planted-bug verdict(s) not as expected: see ! above\n", unexpected);
}
