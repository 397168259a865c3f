/* module_state: a model's buffers (batch-norm running statistics, the amax
 * history and scale of a quantising layer) — state that a forward reads
 * and updates outside the autograd graph, as nn.Module buffers are. Ops
 * read buffers through the read set and update them through the write set;
 * a checkpoint's recompute points both at a scratch copy of the state as
 * it was when the checkpoint's forward began, so the recompute sees the
 * forward's state and leaves the live state alone (TransformerEngine's
 * FP8 recompute does this for its scaling state; torch.utils.checkpoint
 * does not, which updates BatchNorm statistics twice). */
#ifndef CKPT_MODULE_STATE_H
#define CKPT_MODULE_STATE_H

#include "aten/aten.h"

#define MODULE_BUFFER_NAME_MAX 48

/* A buffer's layout: name, shape, initial value (all elements). */
struct module_buffer {
    char name[MODULE_BUFFER_NAME_MAX]; /* "l0.running_mean" */
    int layer;
    int ndim;
    int64_t shape[2];
    enum dtype dtype;
    double init;
};

/* What a recompute reads its state from and writes its updates to. The
 * reference replays (reads and writes a copy of the forward's state); the
 * others are planted bugs (impls/faulty/state_bugs.c). */
enum state_replay {
    STATE_REPLAY = 0,      /* read the forward's state, updates discarded */
    STATE_READ_LIVE,       /* read the live (already updated) state, updates discarded */
    STATE_WRITE_LIVE,      /* read the forward's state, updates land in the live state */
    STATE_LIVE             /* no replay: read and update the live state */
};

struct module_state {
    int n;
    const struct module_buffer *layout; /* n entries, owned by the model */
    int device;
    tensor **live;    /* the run's buffers */
    tensor **read;    /* what ops read now: live, or a recompute's scratch */
    tensor **write;   /* what ops update now */
};

/* A copy of every buffer, taken when a checkpoint's forward begins. */
struct state_snapshot {
    int n;
    tensor **buffers;
};

/* Where a recompute's reads and writes went before it began (restored on exit). */
struct state_recompute {
    tensor **scratch;
    tensor **previous_read, **previous_write;
    int n;
};

/* Allocates the live buffers at their initial values; read = write = live. */
int module_state_init(struct module_state *s, const struct module_buffer *layout, int n, int device);
void module_state_free(struct module_state *s);
/* Buffer i as ops must read it / update it now. */
tensor *module_state_read(const struct module_state *s, int i);
tensor *module_state_write(const struct module_state *s, int i);

/* Copies what ops read now (a recompute nested in another sees the outer
 * recompute's state, as its forward did). n = 0 snapshots nothing. */
int module_state_snapshot(const struct module_state *s, struct state_snapshot *out);
void state_snapshot_free(struct state_snapshot *snap);
/* Before a recompute: reads and writes go where `how` says; scratch is a
 * copy of the snapshot (or of the live state for STATE_READ_LIVE). */
int module_state_recompute_enter(struct module_state *s, const struct state_snapshot *snap, enum state_replay how,
                                 struct state_recompute *frame);
/* After it (always, also on failure): reads and writes go back where they were. */
void module_state_recompute_exit(struct module_state *s, struct state_recompute *frame);
/* Bytes of one snapshot: what a checkpoint holds for state until backward. */
int64_t module_state_bytes(const struct module_buffer *layout, int n);

#endif
