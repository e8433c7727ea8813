/*
 * utf8.c -- UTF-8 validation and text made safe for a JSON string; see utf8.h. Owns
 * only the scratch buffer of task_utf8_to_json, freed before it returns.
 */
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

size_t task_utf8_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    unsigned min;
    unsigned cp;
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2, min = 0x80, cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, min = 0x800, cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

json_t *task_utf8_to_json(const char *s, size_t n, bool one_line)
{
    char *out = malloc(n * 3 + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = task_utf8_len((const unsigned char *)s + i, n - i);
        if (l == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        if (s[i] == '\0' || (one_line && l == 1 && (unsigned char)s[i] < 0x20)) {
            out[o++] = ' ';
        } else {
            memcpy(out + o, s + i, l);
            o += l;
        }
        i += l;
    }
    json_t *v = json_stringn(out, o);
    free(out);
    return v;
}
