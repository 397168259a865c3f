/* replay_main: runs a fuzz target's LLVMFuzzerTestOneInput on files, for
 * builds without libFuzzer (gcc, the ASan build): the regression inputs
 * under tests/data/fuzz/<target>/ are replayed by every build, not only by
 * the clang one. Arguments are files or directories (their regular files,
 * not recursive). Exit 0 when every input ran; a finding aborts. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, used = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, used);
    free(buf);
    return 0;
}

static int replay_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int failed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        failed |= replay_file(path);
        ++*count;
    }
    closedir(d);
    return failed;
}

int main(int argc, char **argv)
{
    int failed = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            failed |= replay_dir(argv[i], &count);
        } else {
            failed |= replay_file(argv[i]);
            count++;
        }
    }
    printf("replayed %d input(s)%s\n", count, failed ? "; some could not be read" : "");
    return failed || count == 0;
}
