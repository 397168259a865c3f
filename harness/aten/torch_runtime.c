/* dl_iterate_phdr is a GNU extension. */
#define _GNU_SOURCE
#include "torch_runtime.h"

#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#ifndef CKPT_TORCH_BUILD_VERSION
#define CKPT_TORCH_BUILD_VERSION "unknown"
#endif
#ifndef CKPT_TORCH_BUILD_CUDA
#define CKPT_TORCH_BUILD_CUDA "unknown"
#endif
#ifndef CKPT_TORCH_PINNED
#define CKPT_TORCH_PINNED "unknown"
#endif

const char *torch_compiled_version(void) { return CKPT_TORCH_BUILD_VERSION; }
const char *torch_compiled_cuda(void) { return CKPT_TORCH_BUILD_CUDA; }
const char *torch_pinned_version(void) { return CKPT_TORCH_PINNED; }

/* Copies the quoted value that follows the first '=' of `line` (up to the
 * end of the line); "None" unquoted gives "none". */
static int quoted_value(const char *line, char *out, size_t len)
{
    const char *eq = strchr(line, '=');
    const char *end_of_line = strchr(line, '\n');
    if (!eq || (end_of_line && eq > end_of_line))
        return 0;
    const char *p = eq + 1;
    while (*p == ' ')
        p++;
    if (strncmp(p, "None", 4) == 0) {
        snprintf(out, len, "none");
        return 1;
    }
    if (*p != '\'' && *p != '"')
        return 0;
    char quote = *p++;
    const char *close = strchr(p, quote);
    if (!close || (end_of_line && close > end_of_line))
        return 0;
    snprintf(out, len, "%.*s", (int)(close - p), p);
    return 1;
}

static const char *line_starting(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, prefix, n) == 0)
            return line;
    return NULL;
}

int torch_runtime_parse(struct torch_runtime *rt, const char *text)
{
    snprintf(rt->version, sizeof rt->version, "unknown");
    snprintf(rt->cuda, sizeof rt->cuda, "unknown");
    const char *v = line_starting(text, "__version__");
    if (v) {
        if (!quoted_value(v, rt->version, sizeof rt->version))
            return 0;
        const char *c = line_starting(text, "cuda:");
        if (!c)
            c = line_starting(text, "cuda =");
        if (c)
            quoted_value(c, rt->cuda, sizeof rt->cuda);
        return 1;
    }
    /* build-version: the version alone, "2.11.0+cu130\n". */
    size_t n = strcspn(text, " \t\r\n");
    if (n == 0 || n >= sizeof rt->version || !strchr("0123456789", text[0]))
        return 0;
    snprintf(rt->version, sizeof rt->version, "%.*s", (int)n, text);
    /* The local tag names the CUDA build: "+cu130" is CUDA 13.0 (the last
     * digit is the minor version), "+cpu" none. */
    const char *tag = strstr(rt->version, "+cu");
    size_t digits = tag ? strspn(tag + 3, "0123456789") : 0;
    if (digits >= 2)
        snprintf(rt->cuda, sizeof rt->cuda, "%.*s.%c", (int)(digits - 1), tag + 3, tag[3 + digits - 1]);
    else if (strstr(rt->version, "+cpu"))
        snprintf(rt->cuda, sizeof rt->cuda, "none");
    return 1;
}

static int find_libtorch(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name;
    const char *slash = name ? strrchr(name, '/') : NULL;
    const char *base = slash ? slash + 1 : name;
    if (!base || (strncmp(base, "libtorch_cpu.so", 15) != 0 && strncmp(base, "libc10.so", 9) != 0))
        return 0;
    struct torch_runtime *rt = data;
    snprintf(rt->library, sizeof rt->library, "%s", name);
    return strncmp(base, "libtorch_cpu.so", 15) == 0; /* stop at libtorch_cpu; libc10 is the fallback */
}

static int read_small_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n > 0;
}

int torch_runtime_read(struct torch_runtime *rt)
{
    memset(rt, 0, sizeof *rt);
    snprintf(rt->version, sizeof rt->version, "unknown");
    snprintf(rt->cuda, sizeof rt->cuda, "unknown");
    dl_iterate_phdr(find_libtorch, rt);
    if (!rt->library[0])
        return error_set(ST_INTERNAL, "no libtorch is loaded in this process");
    /* <root>/lib/libtorch_cpu.so: a wheel keeps <root>/version.py (root =
     * site-packages/torch), a libtorch distribution <root>/build-version. */
    char root[TORCH_RUNTIME_PATH_MAX];
    snprintf(root, sizeof root, "%s", rt->library);
    char *slash = strrchr(root, '/');
    if (!slash)
        return ST_OK;
    *slash = '\0';
    slash = strrchr(root, '/');
    if (!slash)
        return ST_OK;
    *slash = '\0';
    static const char *const version_files[] = {"version.py", "build-version"};
    char path[TORCH_RUNTIME_PATH_MAX + 32], text[8192];
    for (size_t i = 0; i < sizeof version_files / sizeof *version_files; i++) {
        snprintf(path, sizeof path, "%s/%s", root, version_files[i]);
        if (read_small_file(path, text, sizeof text) && torch_runtime_parse(rt, text))
            return ST_OK;
    }
    return ST_OK;
}

int torch_runtime_check(void)
{
    struct torch_runtime rt;
    if (torch_runtime_read(&rt) != ST_OK)
        return ST_INTERNAL;
    if (strcmp(rt.version, "unknown") == 0 || strcmp(torch_compiled_version(), "unknown") == 0)
        return ST_OK;
    if (strcmp(rt.version, torch_compiled_version()) == 0)
        return ST_OK;
    return error_set(ST_INPUT,
                     "compiled against torch %s but running with torch %s (%s); rebuild against this torch "
                     "(cmake -S . -B build) or run with the libtorch it was built for",
                     torch_compiled_version(), rt.version, rt.library);
}
