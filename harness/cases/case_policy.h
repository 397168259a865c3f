/* case_policy: a case's selective-checkpointing policy against its model:
 * which policy ops the model runs (as its fusion and dropout make them) and
 * how often per layer, the case's policy resolved against them, and the
 * check that a case's policy, impls and model fit together. The parsing of
 * a policy itself is policy.h, which knows nothing of cases. */
#ifndef CKPT_CASE_POLICY_H
#define CKPT_CASE_POLICY_H

#include "case.h"
#include "policy.h"

/* The ops model c->model saves through in its layers, as its fusion and
 * dropout make them (a policy may name only these). */
unsigned policy_model_ops(const struct ckpt_case *c);
/* How many times op runs per layer of the case's model. */
int policy_calls_per_layer(const struct ckpt_case *c, enum policy_op op);
/* The case's policy resolved against its model (save_matmuls and
 * attention_core keep only the ops the model has); 0 without a policy. */
unsigned policy_of_case(const struct ckpt_case *c);

/* Checks a complete case: a policy needs an impl that uses it, such an impl
 * needs a policy, and every op a policy names must exist in the model.
 * ST_INPUT naming file:line (the line given) otherwise. */
int policy_check_case(const struct ckpt_case *c, const char *path, int line);

#endif
