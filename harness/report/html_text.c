/* html_text: escaping for report.html (html_text.h). */
#include "html_text.h"

#include <string.h>

/* Length of the UTF-8 sequence at s (at most n bytes available), 0 when it
 * is not a well-formed one (overlong, surrogate, past U+10FFFF, cut short). */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min, cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void html_put_textn(FILE *out, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n && s[i]) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t len = utf8_length(s + i, strnlen(text + i, n - i));
            if (len) {
                fwrite(s + i, 1, len, out);
                i += len;
            } else {
                fputs("\xef\xbf\xbd", out); /* U+FFFD */
                i++;
            }
            continue;
        }
        switch (c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        case '\t':
        case '\n': fputc(c, out); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fputs("\xef\xbf\xbd", out);
            else
                fputc(c, out);
        }
        i++;
    }
}

void html_put_text(FILE *out, const char *s) { html_put_textn(out, s, strlen(s)); }

void html_svg_text(char *buf, size_t len, const char *s)
{
    size_t o = 0;
    if (!len)
        return;
    for (; *s && o + 6 < len; s++) {
        const char *rep = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : NULL;
        if (rep) {
            memcpy(buf + o, rep, strlen(rep));
            o += strlen(rep);
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = '\0';
}
