/* policy: the per-op save/recompute policy of selective checkpointing (the
 * case key `policy`). It names the ops whose saved tensors a selective
 * checkpoint keeps from forward; every other op's saved tensors are
 * recomputed. Torch-free and case-free: the case loader parses policies
 * with it; a case's own policy, resolved against its model, is
 * case_policy.h. */
#ifndef CKPT_POLICY_H
#define CKPT_POLICY_H

#include <stddef.h>

/* The ops that save tensors for backward, named as the tape names their
 * nodes (ops.c); a policy is a bit set over them. */
enum policy_op {
    POP_LINEAR = 0,
    POP_CAUSAL_ATTENTION,
    POP_LAYER_NORM,
    POP_GELU,
    POP_GELU_TANH,
    POP_BIAS_GELU_FUSED,
    POP_BIAS_GELU_FUSED_ATOMIC,
    POP_DROPOUT,
    POP_BIAS_DROPOUT_ADD,
    POP_RRELU,
    POP_BATCH_NORM,
    POP_COUNT
};

#define POLICY_BIT(op) (1u << (op))
#define POLICY_ALL ((1u << POP_COUNT) - 1u)

const char *policy_op_name(enum policy_op op);
/* The op of a tape node name ("linear"), or -1 for an op no policy names. */
int policy_op_from_name(const char *name);
/* Whether the policy keeps what node `name` saves. */
int policy_keeps(unsigned keep, const char *name);
/* The ops that draw random numbers (dropout, bias_dropout_add, rrelu). */
unsigned policy_random_ops(void);

/* Parses `save_matmuls`, `attention_core` or `save:op,op,...` into the set
 * of kept ops; ST_INPUT with the reason in why otherwise. */
int policy_parse(const char *text, unsigned *keep, char *why, size_t len);
/* The names of the ops in the set, as "linear, gelu" (for messages). */
void policy_list_ops(unsigned ops, char *buf, size_t len);

/* The impls that take the case's policy: selective and its planted bugs. */
int policy_impl_uses_policy(const char *impl);

#endif
