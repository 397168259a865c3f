/* html_text: text from anyone's files (case and impl names, reasons, paths)
 * put into an HTML page so that it can only ever show as text: & < > " '
 * become entities, control characters other than tab and newline and bytes
 * that are not UTF-8 become U+FFFD. Safe in element content and in quoted
 * attribute values alike. */
#ifndef CKPT_HTML_TEXT_H
#define CKPT_HTML_TEXT_H

#include <stddef.h>
#include <stdio.h>

void html_put_text(FILE *out, const char *s);
/* The first n bytes of s (stops early at a NUL). */
void html_put_textn(FILE *out, const char *s, size_t n);
/* s as gnuplot's SVG terminal writes it in a <text> element (& and <
 * as entities, the rest as is), for finding a name in a drawn plot. */
void html_svg_text(char *buf, size_t len, const char *s);

#endif
