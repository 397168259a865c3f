/* verdict_colour: the one colour rule for a verdict, shared by the
 * determinism plot and report.html's table and sections, so an expected
 * FAIL reads the same in both: the colour says "as expected or not", never
 * "good or bad". */
#ifndef CKPT_VERDICT_COLOUR_H
#define CKPT_VERDICT_COLOUR_H

enum verdict_colour {
    VC_AS_EXPECTED, /* green: a PASS or NOISE the case expects */
    VC_CAUGHT,      /* blue: a bad verdict the case expects (a planted bug caught) */
    VC_NO_FIGURE,   /* grey: expected, but it cannot show here or has no figure to compare */
    VC_UNEXPECTED,  /* red: not the verdict the case expects */
    VC_COUNT
};

/* The colour of a record: `expected` and `verdict` as summary.json states
 * them, `has_figure` 0 where no distance was measured; `judged` 0 for a
 * twin that was not judged (grey). */
enum verdict_colour verdict_colour_of(int expected, const char *verdict, int has_figure, int judged);
unsigned verdict_colour_rgb(enum verdict_colour c); /* 0xRRGGBB */
const char *verdict_colour_class(enum verdict_colour c); /* "c-expected", "c-caught", ... */
const char *verdict_colour_words(enum verdict_colour c); /* "as expected", "a planted bug caught, as expected", ... */

#endif
