/* shard: which slice of a selected case list one of N parallel jobs runs.
 * "--shard K/N" (1 <= K <= N) takes the cases whose position in the
 * selected list (the loaded order, after --case/--suite) is K-1 modulo N:
 * stable across runs and machines for the same case files and selection,
 * and round-robin, so neighbouring sweep members (similar cost) spread over
 * the jobs. Every case lands in exactly one shard. */
#ifndef CKPT_SHARD_H
#define CKPT_SHARD_H

#define SHARD_MAX 100000

struct shard {
    int k, n; /* 1-based index, count; {1, 1} takes everything */
};

/* Parses "K/N"; anything else is ST_INPUT with a one-line message. */
int shard_parse(const char *text, struct shard *out);
/* Whether the case at `index` (0-based, in the selected list) is this shard's. */
int shard_takes(const struct shard *s, int index);

#endif
