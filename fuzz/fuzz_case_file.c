/* fuzz_case_file: libFuzzer target for the case loader. The bytes are a
 * case file; loading must succeed or fail with one message line, never
 * crash, leak or read out of bounds. A case that loads must also survive a
 * round trip: its attributes, written back as a [case:NAME] section (as
 * case_foreach_attr promises), load as the same case. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case.h"
#include "error.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ini_writer {
    char *buf;
    size_t cap, used;
    int overflow;
};

/* name, file and line say where a case came from; they are not keys. */
static void write_key(void *ctx, const char *key, const char *value)
{
    struct ini_writer *w = ctx;
    if (!strcmp(key, "name") || !strcmp(key, "file") || !strcmp(key, "line"))
        return;
    int n = snprintf(w->buf + w->used, w->cap - w->used, "%s = %s\n", key, value);
    if (n < 0 || (size_t)n >= w->cap - w->used)
        w->overflow = 1;
    else
        w->used += (size_t)n;
}

/* Reloads c from its printed attributes and aborts if anything changed. */
static void check_round_trip(const struct ckpt_case *c)
{
    static const size_t cap = 64 * 1024;
    struct ini_writer w = {malloc(cap), cap, 0, 0};
    if (!w.buf)
        return;
    w.used = (size_t)snprintf(w.buf, cap, "[case:%s]\n", c->name);
    case_foreach_attr(c, write_key, &w);
    char path[4096];
    if (w.overflow || fuzz_write_temp((const uint8_t *)w.buf, w.used, path, sizeof path) != 0) {
        free(w.buf);
        return;
    }
    struct case_list again = {0};
    int st = case_list_load_file(&again, path);
    unlink(path);
    if (st != ST_OK || again.count != 1) {
        fprintf(stderr, "round trip of case %s failed: %s\n--- printed as:\n%s", c->name,
                st ? error_message() : "not exactly one case", w.buf);
        abort();
    }
    struct ckpt_case copy = again.items[0];
    /* Only where it was defined may differ. */
    memcpy(copy.file, c->file, sizeof copy.file);
    copy.line = c->line;
    if (memcmp(&copy, c, sizeof copy) != 0) {
        fprintf(stderr, "round trip changed case %s; printed as:\n%s", c->name, w.buf);
        abort();
    }
    case_list_free(&again);
    free(w.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    if (fuzz_write_temp(data, size, path, sizeof path) != 0)
        return 0;
    struct case_list list = {0};
    error_clear();
    int st = case_list_load_file(&list, path);
    unlink(path);
    fuzz_check_message(st);
    if (st == ST_OK) {
        const char *near[3];
        case_list_suggest(&list, "bias_gelu_bs3", near, 3);
        /* Round trips are the slow part; a few per input find what many would. */
        for (int i = 0; i < list.count && i < 4; i++) {
            check_round_trip(&list.items[i]);
            case_expected_mask(&list.items[i], "reentrant");
        }
    } else if (list.count != 0) {
        fprintf(stderr, "a failed load left %d cases in the list\n", list.count);
        abort();
    }
    case_list_free(&list);
    return 0;
}
