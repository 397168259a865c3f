/* checked_objects: which stored objects of which reports have had their
 * checksums verified, so that each is read for it once however many paths
 * reach it. Shared by a reader's runs (run_record.checked); plain memory,
 * no HDF5. */
#ifndef CKPT_CHECKED_OBJECTS_H
#define CKPT_CHECKED_OBJECTS_H

#include <stddef.h>

#include "run_record.h"

/* The HDF5 objects of reports whose checksums have been verified: each
 * object (a report's file identity and the object's address in it) once,
 * however many paths reach it. Zero-initialised is empty. */
struct checked_objects {
    size_t n, cap;
    unsigned char (*keys)[32];
};
/* Adds t's object (of r's report); ST_RUN when out of memory. */
int checked_objects_add(struct checked_objects *s, const struct run_record *r, const struct run_tensor *t);
int checked_objects_has(const struct checked_objects *s, const struct run_record *r, const struct run_tensor *t);
void checked_objects_free(struct checked_objects *s);

#endif
