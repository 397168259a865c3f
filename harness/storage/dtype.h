/* dtype: the element types the harness stores and compares, with their names
 * as they appear in case files, HDF5 attributes and reports. Pure C: the
 * compare and HDF5 modules use it without libtorch. */
#ifndef CKPT_DTYPE_H
#define CKPT_DTYPE_H

#include <stddef.h>

enum dtype { DT_F32 = 0, DT_BF16, DT_F16, DT_F64, DT_I64, DT_U8, DT_BOOL, DT_COUNT };

/* "float32", "bfloat16", "float16", "float64", "int64", "uint8", "bool" */
const char *dtype_name(enum dtype d);
/* Accepts the names above and the short forms fp32/f32, bf16, fp16/f16. -1 if unknown. */
int dtype_from_name(const char *name);
size_t dtype_size(enum dtype d);
int dtype_is_float(enum dtype d);

#endif
