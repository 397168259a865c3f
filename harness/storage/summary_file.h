/* summary_file: summary.json on disk. Loading one back checks that it is a
 * ckpt-verify summary (an object whose "records" array holds objects that
 * name a case, an impl and a known verdict), so the readers — the
 * regression comparison, junit and merge — can trust those three fields;
 * anything else is one ST_INPUT line naming the file. Writing is atomic:
 * a temporary name in the same directory, then rename. */
#ifndef CKPT_SUMMARY_FILE_H
#define CKPT_SUMMARY_FILE_H

#include <jansson.h>

/* `path` is a run directory (DIR/summary.json is read) or the file itself.
 * On success *out holds a new reference. */
int summary_file_load(const char *path, json_t **out);
/* Writes root as DIR/NAME (JSON, indented, sorted keys) atomically. */
int summary_file_write(const json_t *root, const char *dir, const char *name);
/* Writes len bytes as DIR/NAME atomically. */
int file_write_atomic(const char *dir, const char *name, const char *data, size_t len);
/* Writes n files (at most FILES_ATOMIC_MAX) into DIR as one set: each to
 * its temporary first, and only when all are written are they renamed into
 * place, so a full disk leaves the previous set, never a mix of old and new
 * (summary.json beside an older junit.xml). */
#define FILES_ATOMIC_MAX 4
int files_write_atomic(const char *dir, int n, const char *const *names, const char *const *data, const size_t *lens);
/* root as summary.json's text (indented, sorted keys, a final newline);
 * malloc'd, NULL when out of memory. */
char *summary_file_text(const json_t *root, size_t *len);

/* Field readers for one record (or the root): a missing or mistyped field
 * reads as "" / NaN / 0, so optional metrics need no checks at the caller. */
const char *summary_str(const json_t *obj, const char *key);
double summary_num(const json_t *obj, const char *key); /* null (NaN/inf in the run) -> NaN */
int summary_bool(const json_t *obj, const char *key);
/* The record's verdict as enum verdict (checked at load). */
int summary_verdict(const json_t *rec);

#endif
