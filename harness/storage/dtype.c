#include "dtype.h"

#include <string.h>

static const char *const dtype_names[DT_COUNT] = {
    "float32", "bfloat16", "float16", "float64", "int64", "uint8", "bool",
};

const char *dtype_name(enum dtype d) { return (unsigned)d < DT_COUNT ? dtype_names[d] : "?"; }

int dtype_from_name(const char *name)
{
    static const struct { const char *alias; enum dtype d; } aliases[] = {
        {"fp32", DT_F32}, {"f32", DT_F32}, {"bf16", DT_BF16},
        {"fp16", DT_F16}, {"f16", DT_F16}, {"half", DT_F16}, {"fp64", DT_F64},
    };
    for (int d = 0; d < DT_COUNT; d++)
        if (strcmp(name, dtype_names[d]) == 0)
            return d;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0)
            return aliases[i].d;
    return -1;
}

size_t dtype_size(enum dtype d)
{
    switch (d) {
    case DT_F32: return 4;
    case DT_BF16: case DT_F16: return 2;
    case DT_F64: case DT_I64: return 8;
    case DT_U8: case DT_BOOL: return 1;
    default: return 0;
    }
}

int dtype_is_float(enum dtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16 || d == DT_F64; }
