#include "verdict_colour.h"

#include <string.h>

static const struct {
    unsigned rgb;
    const char *cls, *words;
} colours[VC_COUNT] = {
    [VC_AS_EXPECTED] = {0xa5d6a7u, "c-expected", "as expected"},
    [VC_CAUGHT] = {0x90caf9u, "c-caught", "a planted bug caught, as expected"},
    [VC_NO_FIGURE] = {0xdededeu, "c-nofigure", "as expected; it cannot show here, or no figure to compare"},
    [VC_UNEXPECTED] = {0xef5350u, "c-unexpected", "NOT as expected"},
};

enum verdict_colour verdict_colour_of(int expected, const char *verdict, int has_figure, int judged)
{
    if (!judged)
        return VC_NO_FIGURE;
    if (!expected)
        return VC_UNEXPECTED;
    int good = !strcmp(verdict, "PASS") || !strcmp(verdict, "NOISE") || !strcmp(verdict, "NOT_OBSERVABLE");
    if (!good)
        return VC_CAUGHT;
    return !has_figure || !strcmp(verdict, "NOT_OBSERVABLE") ? VC_NO_FIGURE : VC_AS_EXPECTED;
}

unsigned verdict_colour_rgb(enum verdict_colour c) { return colours[(unsigned)c < VC_COUNT ? c : VC_UNEXPECTED].rgb; }

const char *verdict_colour_class(enum verdict_colour c)
{
    return colours[(unsigned)c < VC_COUNT ? c : VC_UNEXPECTED].cls;
}

const char *verdict_colour_words(enum verdict_colour c)
{
    return colours[(unsigned)c < VC_COUNT ? c : VC_UNEXPECTED].words;
}
