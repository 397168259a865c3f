/* policy_statement: what a selective policy saves, stated from its
 * definition and not from the code that runs it (policy_parse, the
 * model's prediction): the ops it names, and for the gpt block the bytes
 * each kept op holds per layer after Korthikanti et al., "Reducing
 * Activation Recomputation in Large Transformer Models" (2022), adapted to
 * the harness's block as docs/memory.md tabulates. The judge holds a
 * selective run's kept ops and held bytes against it. */
#ifndef CKPT_POLICY_STATEMENT_H
#define CKPT_POLICY_STATEMENT_H

#include <stddef.h>

#include "case.h"
#include "held_check.h"
#include "run_record.h"

/* The ops (a bit set over enum policy_op, looked up by name) whose saved
 * tensors the policy text keeps from forward: `save_matmuls` the outputs
 * of the matmuls (Megatron's selective recompute: linear layers and the
 * attention's products), `attention_core` everything but the attention
 * core (Korthikanti's selective recompute), `save:a,b` exactly a and b.
 * ST_INPUT with why for text the statement does not cover. */
int policy_statement_ops(const char *policy, unsigned *keep, char *why, size_t len);

/* The bytes a selective checkpoint of a gpt_block case keeps beyond a full
 * recompute, at the end of forward, when it keeps the ops in `keep`:
 * the sum over checkpointed layers of each kept op's bytes. ST_INPUT with
 * why where the statement does not apply (another model, autocast, a
 * dtype it does not know). */
int policy_statement_gpt_extra_bytes(const struct ckpt_case *c, unsigned keep, double *bytes, char *why, size_t len);

/* Holds a run against the statement: the ops whose saved tensors it kept
 * from forward (selective.ops_kept, among selective.ops_packed: what its
 * checkpoints packed) must be those its policy names (impl runs with the
 * case's policy) or none (a full recompute); a gpt_block run with a policy
 * must hold a full recompute's predicted bytes plus its kept ops'. A run
 * that records no packed ops is HELD_UNJUDGED with why "". */
enum held_outcome policy_statement_check_run(const struct ckpt_case *c, const struct run_record *run, const char *impl,
                                             char *why, size_t len);

#endif
