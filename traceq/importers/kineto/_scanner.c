/*
 * traceq.importers.kineto._scanner: the Kineto fast path's single pass over the event array.
 *
 * scan() validates a run of Chrome-trace events as strict JSON (RFC 8259) and, in the same pass,
 * writes the columns of the fields it is asked for, one row per event, as Arrow buffers:
 *
 *   float fields  -> float64 values + validity bitmap  (JSON numbers; true/false/null -> null)
 *   int fields    -> int64 values + validity bitmap    (integers; integral floats below 2**63;
 *                                                        strings of plain decimal integers)
 *   text fields   -> Arrow string views + validity     (strings, unescaped; plain integers and
 *                                                        true/false keep their JSON text)
 *   triple fields -> three int32 columns (this field and the next two, of type PART) from an
 *                    [x, y, z] array of integers; a component outside int32 is null, any other
 *                    array or value is null; a string that may spell "[x, y, z]" is a fixup
 *
 * Long string views point into the caller's buffer (data buffer 0, offsets from `base`) or, for
 * strings that held escapes, into a side buffer of unescaped text (data buffer 1).  Numbers read
 * into a text field that are not plain integers are left to Python, which spells them the way
 * the lenient path does: they come back as "fixups" (row, field, start, end), as do strings in a
 * triple field and strings in a number field other than plain decimal integers (ROCm writes
 * "bytes": "616"; Python reads the rest as the lenient path does).  An object or array in a number
 * field is null, as on the lenient path.  Output buffers are handed over without a copy (Buffer objects).
 *
 * Of duplicate keys the first wins; `args` fields are the keys directly inside the first `args`
 * object of an event.  Anything this pass cannot vouch for makes it *decline* (the reason comes
 * back as a string and the caller falls back to the lenient parser): invalid JSON, invalid UTF-8,
 * raw control characters in strings, unpaired surrogate escapes, escapes inside keys, an element
 * of the array that is not an object, an object or array in a text field.
 *
 * No Python object is created per event, and the pass runs without the GIL, so that the caller can
 * scan the next block on one thread while it converts the last one on another.
 *
 * A text value longer than MAX_TEXT_BYTES is cut to its first MAX_TEXT_BYTES bytes (at a character
 * boundary; the lenient path cuts the same way), and the pass counts the values it cut.
 *
 * Beside the pass: encode() dictionary-encodes a text column for polars' Categorical, trim() frees
 * the buffers kept for the next pass, move_pages() moves the memory of parsed bytes of an inflated
 * gzip file to where the inflater writes next (fresh pages cost a fault each), and squeeze() drops,
 * as the inflater writes them, the runs of whitespace and the tails of strings that no parser needs
 * kept (see its docstring).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>

#include "_bits.h"
#if TQ_PAGE_MOVES
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <stdlib.h>
#include <string.h>

#define BUFFER_TYPE_NAME "traceq.importers.kineto._scanner.Buffer"
#define BUFFER_DOC "Memory written by scan(), read through the buffer protocol (read-only)."
#include "_buffers.h"

enum { T_FLOAT = 0, T_INT = 1, T_TEXT = 2, T_TRIPLE = 3, T_ARGS = 4, T_PART = 5 };
enum { AT_TOP = 0, AT_ARGS = 1 };
enum { MORE = 0, CLOSED = 1, OPEN_END = 2 };

#define MAX_FIELDS 64
#define KEY_LENGTHS 64
#define MAX_DEPTH 256
#define VIEW_BYTES 16
#define INLINE_BYTES 12
#define MAX_TEXT_BYTES ((size_t)1 << 20)

typedef const unsigned char *Ptr;

typedef struct {
    const char *name;   /* for messages: "ts", "args.correlation" */
    const char *key;
    Py_ssize_t key_len;
    int where;
    int type;
    size_t width;       /* bytes a row */
    unsigned char *values;
    unsigned char *valid;
    size_t values_cap, valid_cap; /* bytes allocated */
    unsigned char padded[KEY_LENGTHS + 8]; /* the key, zero-padded for word compares */
} Field;

typedef struct {
    unsigned char *data;
    size_t size, cap;
} Grow;

typedef struct {
    Ptr buf;            /* the whole buffer */
    Ptr end;
    Ptr base;           /* offsets of string views count from here */
    Field fields[MAX_FIELDS];
    int nfields;
    size_t rows, cap;   /* events written, rows allocated */
    unsigned char set[MAX_FIELDS];
    Grow side;          /* unescaped strings */
    Grow fixups;        /* int64 (row, field, start, end) */
    signed char first_key[2][KEY_LENGTHS][128]; /* by where, key length, first byte: a field index + 1 */
    signed char next_key[MAX_FIELDS];            /* the next field with the same where, length and first byte */
    size_t cut;         /* text values cut to MAX_TEXT_BYTES */
    char error[256];
    int failed;
} Scan;

/* ------------------------------------------------------------------------------------------ */
/* failure and memory */

static Ptr fail(Scan *s, const char *reason) {
    if (!s->failed) {
        s->failed = 1;
        snprintf(s->error, sizeof s->error, "%s", reason);
    }
    return NULL;
}

static Ptr fail_field(Scan *s, const char *what, const Field *f) {
    if (!s->failed) {
        s->failed = 1;
        snprintf(s->error, sizeof s->error, what, f->name);
    }
    return NULL;
}

static int grow_reserve(Grow *g, size_t extra) {
    if (g->size + extra <= g->cap) return 1;
    size_t cap = g->cap ? g->cap : 4096;
    while (cap < g->size + extra) cap *= 2;
    unsigned char *data = realloc(g->data, cap);
    if (!data) return 0;
    g->data = data;
    g->cap = cap;
    return 1;
}

/* Room for one more row in every column (the first call, with the GIL, takes from the pool). */
static int reserve_rows(Scan *s, size_t hint) {
    if (s->rows < s->cap) return 1;
    size_t cap = s->cap ? s->cap * 2 : (hint > 4096 ? (hint + 7) / 8 * 8 : 4096);
    for (int i = 0; i < s->nfields; i++) {
        Field *f = &s->fields[i];
        if (f->type == T_ARGS) continue;
        if (!s->cap) {
            f->values = pool_take(cap * f->width, &f->values_cap);
            f->valid = pool_take(cap / 8, &f->valid_cap);
            if (!f->values || !f->valid) return 0;
            memset(f->values, 0, cap * f->width);
            memset(f->valid, 0, cap / 8);
            continue;
        }
        if (f->values_cap < cap * f->width) {
            unsigned char *values = realloc(f->values, cap * f->width);
            if (!values) return 0;
            f->values = values;
            f->values_cap = cap * f->width;
        }
        memset(f->values + s->cap * f->width, 0, (cap - s->cap) * f->width);
        if (f->valid_cap < cap / 8) {
            unsigned char *valid = realloc(f->valid, cap / 8);
            if (!valid) return 0;
            f->valid = valid;
            f->valid_cap = cap / 8;
        }
        memset(f->valid + s->cap / 8, 0, (cap - s->cap) / 8);
    }
    s->cap = cap;
    return 1;
}

static inline void mark_valid(Field *f, size_t row) { f->valid[row >> 3] |= (unsigned char)(1u << (row & 7)); }

/* ------------------------------------------------------------------------------------------ */
/* lexing */

static inline int blank(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The first byte at or after p that is not JSON whitespace. */
static inline Ptr ws(Ptr p, Ptr e) {
    if (p >= e || !blank(*p)) return p;
    if (++p >= e || !blank(*p)) return p; /* the usual single space: no vector work */
#if TQ_SSE2
    while (p + 16 <= e) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i b = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'))),
                                 _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\t'))));
        unsigned mask = (unsigned)_mm_movemask_epi8(b) ^ 0xFFFFu;
        if (mask) return p + tq_ctz32(mask);
        p += 16;
    }
#endif
    while (p < e && blank(*p)) p++;
    return p;
}

/* The first byte at or after p that ends a run of plain string bytes: a quote, a backslash, a
   control character or a non-ASCII byte. */
static inline Ptr plain_run(Ptr p, Ptr e) {
#if TQ_SSE2
    while (p + 16 <= e) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches them */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                                    _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
        unsigned mask = (unsigned)_mm_movemask_epi8(stop);
        if (mask) return p + tq_ctz32(mask);
        p += 16;
    }
#endif
    while (p < e && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) p++;
    return p;
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int hex4(Ptr p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* A backslash escape at p; returns the byte after it. *code is the code point it stands for. */
static Ptr escape(Scan *s, Ptr p, Ptr e, unsigned *code) {
    if (p + 1 >= e) return fail(s, "the event array is cut off before its closing bracket");
    switch (p[1]) {
        case '"': *code = '"'; return p + 2;
        case '\\': *code = '\\'; return p + 2;
        case '/': *code = '/'; return p + 2;
        case 'b': *code = '\b'; return p + 2;
        case 'f': *code = '\f'; return p + 2;
        case 'n': *code = '\n'; return p + 2;
        case 'r': *code = '\r'; return p + 2;
        case 't': *code = '\t'; return p + 2;
        case 'u': break;
        default: return fail(s, "an invalid backslash escape in a string");
    }
    unsigned high, low;
    if (p + 6 > e || !hex4(p + 2, &high)) return fail(s, "an invalid backslash escape in a string");
    if (high >= 0xDC00 && high <= 0xDFFF) return fail(s, "an unpaired surrogate escape in a string");
    if (high < 0xD800 || high > 0xDBFF) {
        *code = high;
        return p + 6;
    }
    if (p + 12 > e || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, &low) || low < 0xDC00 || low > 0xDFFF)
        return fail(s, "an unpaired surrogate escape in a string");
    *code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    return p + 12;
}

static inline int cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* A multi-byte UTF-8 sequence at p (Python's rules: no overlong forms, no surrogates, <= U+10FFFF). */
static Ptr utf8(Scan *s, Ptr p, Ptr e) {
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (p + 2 <= e && cont(p[1])) return p + 2;
    } else if (c == 0xE0) {
        if (p + 3 <= e && p[1] >= 0xA0 && p[1] <= 0xBF && cont(p[2])) return p + 3;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        if (p + 3 <= e && cont(p[1]) && cont(p[2])) return p + 3;
    } else if (c == 0xED) {
        if (p + 3 <= e && p[1] >= 0x80 && p[1] <= 0x9F && cont(p[2])) return p + 3;
    } else if (c == 0xF0) {
        if (p + 4 <= e && p[1] >= 0x90 && p[1] <= 0xBF && cont(p[2]) && cont(p[3])) return p + 4;
    } else if (c >= 0xF1 && c <= 0xF3) {
        if (p + 4 <= e && cont(p[1]) && cont(p[2]) && cont(p[3])) return p + 4;
    } else if (c == 0xF4) {
        if (p + 4 <= e && p[1] >= 0x80 && p[1] <= 0x8F && cont(p[2]) && cont(p[3])) return p + 4;
    }
    return fail(s, "invalid UTF-8 in a string");
}

/* The string opening at p (a quote); returns the byte after its closing quote. */
static Ptr string_end(Scan *s, Ptr p, Ptr e, int *escaped) {
    p++;
    *escaped = 0;
    for (;;) {
        p = plain_run(p, e);
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        unsigned char c = *p;
        if (c == '"') return p + 1;
        if (c == '\\') {
            unsigned code;
            *escaped = 1;
            p = escape(s, p, e, &code);
        } else if (c < 0x20) {
            return fail(s, c == '\n' || c == '\r' ? "a raw line break inside a string"
                                                 : "a raw control character inside a string");
        } else {
            p = utf8(s, p, e);
        }
        if (!p) return NULL;
    }
}

/* string_end() for an object key: keys are short plain ASCII, which a byte loop finds the end of
   sooner than the vector loop; anything else (an escape, a control or non-ASCII byte) goes to
   string_end() from the start. */
static inline Ptr key_end(Scan *s, Ptr p, Ptr e, int *escaped) {
    for (Ptr q = p + 1; q < e; q++) {
        unsigned char c = *q;
        if (c == '"') {
            *escaped = 0;
            return q + 1;
        }
        if (c < 0x20 || c >= 0x80 || c == '\\') break;
    }
    return string_end(s, p, e, escaped);
}

typedef struct Num Num;
static Ptr number_read(Scan *s, Ptr p, Ptr e, Num *n);

/* The number starting at p; *plain when it has no fraction or exponent. */
static Ptr number_end(Scan *s, Ptr p, Ptr e, int *plain);

static Ptr literal_end(Scan *s, Ptr p, Ptr e) {
    static const char *words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(e - p) >= n && memcmp(p, words[i], n) == 0) {
            Ptr q = p + n;
            if (q < e && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || is_digit(*q) || *q == '_'))
                break;
            return q;
        }
    }
    return fail(s, "a bare word that is not JSON (NaN, Infinity, N/A, ...)");
}

static Ptr skip_value(Scan *s, Ptr p, Ptr e, int depth);

static Ptr skip_container(Scan *s, Ptr p, Ptr e, int depth) {
    unsigned char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    if (depth > MAX_DEPTH) return fail(s, "values nested too deeply");
    p = ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        if (object) {
            int escaped;
            if (*p != '"') return fail(s, "an object key that is not a string");
            p = key_end(s, p, e, &escaped);
            if (!p) return NULL;
            p = ws(p, e);
            if (p >= e || *p != ':') return fail(s, "a missing ':' after an object key");
            p = ws(p + 1, e);
        }
        p = skip_value(s, p, e, depth);
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        if (*p == close) return p + 1;
        if (*p != ',') return fail(s, "a missing ',' between values");
        p = ws(p + 1, e);
        if (p < e && *p == close) return fail(s, "a trailing comma");
    }
}

static Ptr skip_value(Scan *s, Ptr p, Ptr e, int depth) {
    int flag;
    if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
    switch (*p) {
        case '"': return string_end(s, p, e, &flag);
        case '{':
        case '[': return skip_container(s, p, e, depth + 1);
        case 't':
        case 'f':
        case 'n': return literal_end(s, p, e);
        default:
            if (*p == '-' || is_digit(*p)) return number_end(s, p, e, &flag);
            if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
                return fail(s, "a bare word that is not JSON (NaN, Infinity, N/A, ...)");
            if (*p < 0x20) return fail(s, "a control character outside strings");
            return fail(s, "a character that cannot start a JSON value");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* values */

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The double nearest to the JSON number p..q: Python's own correctly rounded, locale-independent
   conversion (for what Clinger's fast path in num_double cannot do exactly). */
static int slow_double(Ptr p, Ptr q, double *out) {
    size_t n = (size_t)(q - p);
    char small[64];
    char *text = n < sizeof small ? small : malloc(n + 1);
    if (!text) return 0;
    memcpy(text, p, n);
    text[n] = 0;
    PyGILState_STATE gil = PyGILState_Ensure(); /* scan() runs without the GIL */
    double v = PyOS_string_to_double(text, NULL, NULL);
    int ok = !(v == -1.0 && PyErr_Occurred());
    if (!ok) PyErr_Clear();
    PyGILState_Release(gil);
    if (text != small) free(text);
    *out = v;
    return ok;
}

/* A number: validated and its digits gathered in one pass. */
struct Num {
    uint64_t mantissa; /* the first 19 significant digits */
    int digits, exponent, exact, plain, negative;
};

static inline void gather(Num *n, unsigned char c, int fraction) {
    if (n->mantissa || c != '0') n->digits++;
    if (n->digits > 19) {
        n->exact = 0;
        return;
    }
    n->mantissa = n->mantissa * 10 + (uint64_t)(c - '0');
    n->exponent -= fraction;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ASCII_ZEROS UINT64_C(0x3030303030303030)

static const uint64_t POW10_U64[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* The value of the eight ASCII digits in w, the first (the most significant) in its lowest byte:
   digits pairwise, then pairs of pairs, then the two halves (three multiplications, not eight). */
static inline uint64_t eight_digits(uint64_t w) {
    w -= ASCII_ZEROS;
    w = w * 10 + (w >> 8);
    return (((w & UINT64_C(0x000000FF000000FF)) * (100 + (UINT64_C(1000000) << 32))) +
            (((w >> 16) & UINT64_C(0x000000FF000000FF)) * (1 + (UINT64_C(10000) << 32)))) >>
           32;
}

#endif

/* The run of digits at q (to at most e), gathered eight bytes at a time (on little-endian CPUs)
   while the mantissa already holds a significant digit (so that every digit counts) and has room
   for them all (19 digits): gather() does the rest, one digit at a time. */
static inline Ptr gather_run(Num *n, Ptr q, Ptr e, int fraction) {
#ifdef ASCII_ZEROS
    while (n->mantissa && q + 8 <= e) {
        uint64_t w;
        memcpy(&w, q, 8);
        /* a byte below '0' sets its top bit in w - '0'...; one above '9' in w + 0x46...; neither
           borrows nor carries into the bytes before the first such byte, which are all we read */
        uint64_t stop = ((w - ASCII_ZEROS) | (w + UINT64_C(0x4646464646464646))) & UINT64_C(0x8080808080808080);
        int k = stop ? tq_ctz64(stop) / 8 : 8;
        if (k == 0 || n->digits + k > 19) break;
        uint64_t run = k == 8 ? w : (w << (8 * (8 - k))) | (ASCII_ZEROS >> (8 * k)); /* '0's before */
        n->mantissa = n->mantissa * POW10_U64[k] + eight_digits(run);
        n->digits += k;
        n->exponent -= fraction * k;
        q += k;
        if (k < 8) return q;
    }
#endif
    for (; q < e && is_digit(*q); q++) gather(n, *q, fraction);
    return q;
}

/* The number starting at p, validated (JSON's grammar), with its digits gathered as it goes. */
static Ptr number_read(Scan *s, Ptr p, Ptr e, Num *n) {
    Ptr q = p;
    memset(n, 0, sizeof *n);
    n->exact = n->plain = 1;
    if (q < e && *q == '-') {
        n->negative = 1;
        q++;
    }
    if (q >= e) return fail(s, "the event array is cut off before its closing bracket");
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        gather(n, *q, 0);
        q = gather_run(n, q + 1, e, 0);
    } else {
        return fail(s, "a number that is not JSON");
    }
    if (q < e && *q == '.') {
        n->plain = 0;
        q++;
        if (q >= e || !is_digit(*q)) return fail(s, "a number that is not JSON");
        q = gather_run(n, q, e, 1);
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        n->plain = 0;
        q++;
        int sign = 1;
        long e10 = 0;
        if (q < e && (*q == '+' || *q == '-')) sign = *q++ == '-' ? -1 : 1;
        if (q >= e || !is_digit(*q)) return fail(s, "a number that is not JSON");
        for (; q < e && is_digit(*q); q++)
            if (e10 < 100000) e10 = e10 * 10 + (*q - '0');
        n->exponent += (int)(sign * e10);
    }
    if (q < e && (is_digit(*q) || *q == '.' || *q == 'e' || *q == 'E'))
        return fail(s, "a number that is not JSON");
    return q;
}

static Ptr number_end(Scan *s, Ptr p, Ptr e, int *plain) {
    Num n;
    Ptr q = number_read(s, p, e, &n);
    *plain = n.plain;
    return q;
}

/* The double nearest to the number p..q (correctly rounded, like Python's float()): Clinger's fast
   path for an exact mantissa up to 2**53 and a power of ten up to 22, else slow_double(). */
static int num_double(const Num *n, Ptr p, Ptr q, double *out) {
    if (n->exact && n->mantissa <= (UINT64_C(1) << 53) && n->exponent >= -22 && n->exponent <= 22) {
        double m = (double)n->mantissa;
        double v = n->exponent < 0 ? m / POW10[-n->exponent] : m * POW10[n->exponent];
        *out = n->negative ? -v : v;
        return 1;
    }
    return slow_double(p, q, out);
}

/* An integer field: plain int64 text, or an integral number below 2**63 in magnitude; else null. */
static int num_int(const Num *n, Ptr p, Ptr q, int64_t *out) {
    if (n->plain && n->exact && n->digits <= 18) { /* below 10**18 < 2**63 */
        *out = n->negative ? -(int64_t)n->mantissa : (int64_t)n->mantissa;
        return 1;
    }
    if (n->plain) {
        Ptr r = p + n->negative;
        uint64_t v = 0;
        int overflow = 0;
        for (; r < q; r++) {
            uint64_t d = (uint64_t)(*r - '0');
            if (v > (UINT64_MAX - d) / 10) {
                overflow = 1;
                break;
            }
            v = v * 10 + d;
        }
        if (!overflow) {
            if (!n->negative && v <= (uint64_t)INT64_MAX) {
                *out = (int64_t)v;
                return 1;
            }
            if (n->negative && v <= (uint64_t)INT64_MAX + 1) {
                *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
                return 1;
            }
        }
    }
    double d;
    if (!num_double(n, p, q, &d)) return 0;
    if (isfinite(d) && d == floor(d) && fabs(d) < 9223372036854775808.0) {
        *out = (int64_t)d;
        return 1;
    }
    return 0;
}

/* The length of text a (of len bytes) as a field keeps it: at most MAX_TEXT_BYTES, cut before a
   UTF-8 continuation byte so that the cut text stays valid (counted in s->cut when cut). */
static size_t kept_length(Scan *s, Ptr a, size_t len) {
    if (len <= MAX_TEXT_BYTES) return len;
    size_t cut = MAX_TEXT_BYTES;
    while (cut > 0 && (a[cut] & 0xC0) == 0x80) cut--;
    s->cut++;
    return cut;
}

static void put_view(Field *f, size_t row, Ptr a, size_t len, uint32_t buffer, size_t offset) {
    unsigned char *v = f->values + row * VIEW_BYTES;
    uint32_t n = (uint32_t)len;
    memcpy(v, &n, 4);
    if (len <= INLINE_BYTES) {
        for (size_t i = 0; i < len; i++) v[4 + i] = a[i];
    } else {
        uint32_t at = (uint32_t)offset;
        memcpy(v + 4, a, 4);
        memcpy(v + 8, &buffer, 4);
        memcpy(v + 12, &at, 4);
    }
    mark_valid(f, row);
}

static int put_utf8(Grow *g, unsigned code) {
    if (!grow_reserve(g, 4)) return 0;
    unsigned char *o = g->data + g->size;
    if (code < 0x80) {
        o[0] = (unsigned char)code;
        g->size += 1;
    } else if (code < 0x800) {
        o[0] = (unsigned char)(0xC0 | (code >> 6));
        o[1] = (unsigned char)(0x80 | (code & 0x3F));
        g->size += 2;
    } else if (code < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (code >> 12));
        o[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (code & 0x3F));
        g->size += 3;
    } else {
        o[0] = (unsigned char)(0xF0 | (code >> 18));
        o[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
        o[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        o[3] = (unsigned char)(0x80 | (code & 0x3F));
        g->size += 4;
    }
    return 1;
}

/* The escaped string a..b (inside its quotes, already validated), unescaped into the side buffer. */
static Ptr put_unescaped(Scan *s, Field *f, size_t row, Ptr a, Ptr b) {
    size_t at = s->side.size;
    while (a < b) {
        Ptr run = a;
        while (a < b && *a != '\\') a++;
        if (a > run) {
            if (!grow_reserve(&s->side, (size_t)(a - run))) return fail(s, "out of memory");
            memcpy(s->side.data + s->side.size, run, (size_t)(a - run));
            s->side.size += (size_t)(a - run);
        }
        if (a < b) {
            unsigned code;
            a = escape(s, a, b, &code);
            if (!a || !put_utf8(&s->side, code)) return fail(s, "out of memory");
        }
    }
    s->side.size = at + kept_length(s, s->side.data + at, s->side.size - at);
    if (s->side.size > INT32_MAX) return fail(s, "escaped strings too long for the fast path");
    /* Views into the side buffer are completed by the caller once the buffer stops moving: the
       inline prefix is copied here, the offset is relative to the side buffer's start. */
    put_view(f, row, s->side.data + at, s->side.size - at, 1, at);
    return b;
}

static int add_fixup(Scan *s, size_t row, int field, Ptr a, Ptr b) {
    int64_t record[4] = {(int64_t)row, field, (int64_t)(a - s->buf), (int64_t)(b - s->buf)};
    if (!grow_reserve(&s->fixups, sizeof record)) return 0;
    memcpy(s->fixups.data + s->fixups.size, record, sizeof record);
    s->fixups.size += sizeof record;
    return 1;
}

/* The array p..q (validated JSON) as [x, y, z] integers; ok[k] when component k fits int32. */
static int triple(Ptr p, Ptr q, int32_t v[3], int ok[3]) {
    Ptr r = p + 1;
    for (int k = 0; k < 3; k++) {
        r = ws(r, q);
        int negative = r < q && *r == '-';
        if (negative) r++;
        if (r >= q || !is_digit(*r)) return 0;
        int64_t magnitude = 0;
        ok[k] = 1;
        for (; r < q && is_digit(*r); r++) {
            magnitude = magnitude * 10 + (*r - '0');
            if (magnitude > (int64_t)INT32_MAX + 1) {
                ok[k] = 0;
                magnitude = 0;
            }
        }
        if (ok[k] && (negative ? -magnitude < INT32_MIN : magnitude > INT32_MAX)) ok[k] = 0;
        v[k] = ok[k] ? (int32_t)(negative ? -magnitude : magnitude) : 0;
        r = ws(r, q);
        if (r >= q || *r != (k < 2 ? ',' : ']')) return 0;
        r++;
    }
    return r == q;
}

/* A kernel's grid or block: written into the triple field `index` and the two after it. */
static Ptr read_triple(Scan *s, int index, size_t row, Ptr p, Ptr e, int depth) {
    int escaped;
    Ptr q;
    if (*p == '"') {
        q = string_end(s, p, e, &escaped);
        if (q && (escaped || (q - p > 2 && p[1] == '[')) && !add_fixup(s, row, index, p, q)) return fail(s, "out of memory");
        return q;
    }
    if (*p != '[') return skip_value(s, p, e, depth);
    q = skip_container(s, p, e, depth + 1);
    int32_t v[3];
    int ok[3];
    if (q && triple(p, q, v, ok)) {
        for (int k = 0; k < 3; k++) {
            if (!ok[k]) continue;
            memcpy(s->fields[index + k].values + row * 4, &v[k], 4);
            mark_valid(&s->fields[index + k], row);
        }
    }
    return q;
}

/* A string p..q (with its quotes, validated) in a number field.  ROCm's HIP rows write numbers as
   strings ("bytes": "616"): a plain decimal integer of up to 18 digits in an int field is read here,
   as int(text, 0) reads it; anything else (a float field, hex, whitespace, escapes, leading zeros)
   is a fixup, converted in Python by the lenient path's own rule, and stays null until then. */
static Ptr read_number_text(Scan *s, int index, size_t row, Ptr p, Ptr q, int escaped) {
    Field *f = &s->fields[index];
    Ptr a = p + 1, b = q - 1;
    int negative = a < b && *a == '-';
    Ptr d = a + negative;
    size_t digits = (size_t)(b - d);
    int plain = !escaped && f->type == T_INT && digits >= 1 && digits <= 18 && (*d != '0' || digits == 1);
    for (Ptr r = d; plain && r < b; r++) plain = is_digit(*r);
    if (!plain) return add_fixup(s, row, index, p, q) ? q : fail(s, "out of memory");
    int64_t v = 0;
    for (Ptr r = d; r < b; r++) v = v * 10 + (*r - '0');
    if (negative) v = -v;
    memcpy(f->values + row * 8, &v, 8);
    mark_valid(f, row);
    return q;
}

/* The value at p, read into field f of this row; returns the byte after it. */
static Ptr read_value(Scan *s, int index, size_t row, Ptr p, Ptr e, int depth) {
    Field *f = &s->fields[index];
    int escaped, plain;
    Ptr q;
    if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
    if (f->type == T_TRIPLE) return read_triple(s, index, row, p, e, depth);
    unsigned char c = *p;
    int numeric = f->type == T_FLOAT || f->type == T_INT;
    if (c == '"') {
        q = string_end(s, p, e, &escaped);
        if (!q) return NULL;
        if (numeric) return read_number_text(s, index, row, p, q, escaped);
        if (!escaped) {
            if ((size_t)(q - 1 - s->base) > INT32_MAX) return fail(s, "a chunk too long for the fast path");
            put_view(f, row, p + 1, kept_length(s, p + 1, (size_t)(q - 1 - (p + 1))), 0, (size_t)(p + 1 - s->base));
            return q;
        }
        return put_unescaped(s, f, row, p + 1, q - 1) ? q : NULL;
    }
    if (c == '{' || c == '[') {
        q = skip_container(s, p, e, depth + 1);
        if (!q) return NULL;
        if (numeric) return q; /* null, as the lenient path reads it */
        return fail_field(s, "an object or array where %s should be text", f);
    }
    if (c == 't' || c == 'f' || c == 'n') {
        q = literal_end(s, p, e);
        if (!q) return NULL;
        if (!numeric && c != 'n') put_view(f, row, p, (size_t)(q - p), 0, (size_t)(p - s->base));
        return q;
    }
    if ((c == '-' || is_digit(c)) && numeric) {
        Num n;
        q = number_read(s, p, e, &n);
        if (!q) return NULL;
        if (f->type == T_FLOAT) {
            double v;
            if (!num_double(&n, p, q, &v)) return fail(s, "a number that is not JSON");
            memcpy(f->values + row * 8, &v, 8);
            mark_valid(f, row);
        } else {
            int64_t v;
            if (num_int(&n, p, q, &v)) {
                memcpy(f->values + row * 8, &v, 8);
                mark_valid(f, row);
            }
        }
        return q;
    }
    if (c == '-' || is_digit(c)) {
        q = number_end(s, p, e, &plain);
        if (!q) return NULL;
        if (plain && !(q - p == 2 && p[0] == '-')) {
            put_view(f, row, p, kept_length(s, p, (size_t)(q - p)), 0, (size_t)(p - s->base));
        } else {
            mark_valid(f, row);
            if (!add_fixup(s, row, index, p, q)) return fail(s, "out of memory");
        }
        return q;
    }
    return skip_value(s, p, e, depth);
}

static inline uint64_t load8(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether the n bytes at b (inside a buffer ending at e) are field f's key: 8 bytes at a time where
   the buffer has room to read whole words (the little-endian masks keep the first bytes). */
static inline int same(const Field *f, Ptr b, size_t n, Ptr e) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if ((size_t)(e - b) >= ((n + 7) & ~(size_t)7)) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            if (load8(f->padded + i) != load8(b + i)) return 0;
        return i == n || !((load8(f->padded + i) ^ load8(b + i)) & ((UINT64_C(1) << (8 * (n - i))) - 1));
    }
#endif
    for (size_t i = 0; i < n; i++)
        if (f->padded[i] != b[i]) return 0;
    return 1;
}

static int find_field(Scan *s, int where, Ptr key, size_t len, Ptr e) {
    if (len == 0 || len >= KEY_LENGTHS || key[0] >= 128) return -1;
    for (int i = s->first_key[where][len][key[0]] - 1; i >= 0; i = s->next_key[i] - 1)
        if (same(&s->fields[i], key, len, e)) return i;
    return -1;
}

/* An object whose keys are matched against the fields `where`; p is at its '{'. */
static Ptr read_object(Scan *s, int where, size_t row, Ptr p, Ptr e, int depth) {
    p = ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        int escaped;
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        if (*p != '"') return fail(s, "an object key that is not a string");
        Ptr key = p + 1;
        p = key_end(s, p, e, &escaped);
        if (!p) return NULL;
        if (escaped) return fail(s, "a key holds a backslash escape");
        size_t key_len = (size_t)(p - 1 - key);
        p = ws(p, e);
        if (p >= e || *p != ':') return fail(s, "a missing ':' after an object key");
        p = ws(p + 1, e);
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        int index = find_field(s, where, key, key_len, e);
        if (index < 0 || s->set[index]) {
            p = skip_value(s, p, e, depth);
        } else if (s->fields[index].type == T_ARGS) {
            s->set[index] = 1;
            p = *p == '{' ? read_object(s, AT_ARGS, row, p, e, depth + 1) : skip_value(s, p, e, depth);
        } else {
            s->set[index] = 1;
            p = read_value(s, index, row, p, e, depth);
        }
        if (!p) return NULL;
        p = ws(p, e);
        if (p >= e) return fail(s, "the event array is cut off before its closing bracket");
        if (*p == '}') return p + 1;
        if (*p != ',') return fail(s, "a missing ',' between values");
        p = ws(p + 1, e);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the module function */

static void release(Scan *s) {
    for (int i = 0; i < s->nfields; i++) {
        pool_give(s->fields[i].values, s->fields[i].values_cap);
        pool_give(s->fields[i].valid, s->fields[i].valid_cap);
    }
    free(s->side.data);
    free(s->fixups.data);
}

static int parse_fields(Scan *s, PyObject *spec) {
    PyObject *seq = PySequence_Fast(spec, "fields must be a sequence");
    if (!seq) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_FIELDS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many fields");
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Field *f = &s->fields[i];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sy#ii", &f->name, &f->key, &f->key_len, &f->where,
                              &f->type)) {
            Py_DECREF(seq);
            return 0;
        }
        f->width = f->type == T_FLOAT || f->type == T_INT ? 8 : f->type == T_TEXT ? VIEW_BYTES : 4;
        s->nfields = (int)i + 1;
        if (f->type == T_PART) continue;  /* the y and z of the triple before it: never looked up by key */
        if (f->where < 0 || f->where > 1 || f->key_len < 1 || f->key_len >= KEY_LENGTHS || (unsigned char)f->key[0] >= 128) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "a field key must be 1 to 63 bytes, starting with an ASCII byte");
            return 0;
        }
        memcpy(f->padded, f->key, (size_t)f->key_len);
        signed char *slot = &s->first_key[f->where][f->key_len][(unsigned char)f->key[0]];
        s->next_key[i] = *slot;
        *slot = (signed char)(i + 1);
    }
    Py_DECREF(seq);  /* the names stay alive: the caller's tuple holds them */
    for (int i = 0; i < s->nfields; i++) {
        int parts = s->fields[i].type == T_TRIPLE;
        if (parts && (i + 2 >= s->nfields || s->fields[i + 1].type != T_PART || s->fields[i + 2].type != T_PART)) {
            PyErr_SetString(PyExc_ValueError, "a triple field must be followed by its two parts");
            return 0;
        }
    }
    return 1;
}

static PyObject *result(Scan *s, size_t consumed, int status) {
    PyObject *columns = PyList_New(s->nfields);
    if (!columns) return NULL;
    for (int i = 0; i < s->nfields; i++) {
        Field *f = &s->fields[i];
        if (f->type == T_ARGS) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(columns, i, Py_None);
            continue;
        }
        size_t valid = 0;
        for (size_t b = 0; b < (s->rows + 7) / 8; b++) valid += (size_t)tq_popcount8(f->valid[b]);
        PyObject *item = Py_BuildValue("(NNn)", hand_over(f->values, s->rows * f->width, f->values_cap),
                                       hand_over(f->valid, (s->rows + 7) / 8, f->valid_cap),
                                       (Py_ssize_t)(s->rows - valid));
        f->values = f->valid = NULL;
        if (!item) {
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, i, item);
    }
    PyObject *out = Py_BuildValue("(nniNNNn)", (Py_ssize_t)consumed, (Py_ssize_t)s->rows, status, columns,
                                  hand_over(s->side.data, s->side.size, s->side.cap),
                                  hand_over(s->fixups.data, s->fixups.size, s->fixups.cap), (Py_ssize_t)s->cut);
    s->side.data = s->fixups.data = NULL;
    return out;
}

PyDoc_STRVAR(scan_doc,
             "scan(buffer, begin, limit, first, fields, rows_hint=0) -> (consumed, events, status, columns, side, fixups,"
             " cut) | str\n\n"
             "Read events from buffer[begin:], which starts right after the array's '[' (first) or right after\n"
             "an event, until the first event that ends at or after `limit`, the array's ']' or the end of the\n"
             "buffer.  `fields` is a sequence of (name, key, where, type).  Returns a decline reason (str)\n"
             "for anything that is not strict JSON or that a field cannot take.  `cut` counts the text values\n"
             "cut to MAX_TEXT_BYTES.");

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t begin, limit, rows_hint = 0;
    int first;
    PyObject *spec;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnpO|n", &view, &begin, &limit, &first, &spec, &rows_hint)) return NULL;
    Scan s;
    memset(&s, 0, sizeof s);
    PyObject *out = NULL;
    if (!parse_fields(&s, spec)) goto done;
    if (begin < 0 || begin > view.len) {
        PyErr_SetString(PyExc_ValueError, "begin is outside the buffer");
        goto done;
    }
    s.buf = view.buf;
    s.end = s.buf + view.len;
    s.base = s.buf + begin;
    Ptr p = s.base, e = s.end, stop = s.buf + (limit < view.len ? limit : view.len);
    int status = MORE, after_event = !first, no_memory = 0;
    /* rows for the pass: the caller's estimate (from the passes before), else one per 256 bytes */
    size_t hint = rows_hint > 0 ? (size_t)rows_hint : (size_t)(stop - s.base) / 256;
    if (!reserve_rows(&s, hint)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS  /* the pass touches no Python object: other threads run meanwhile */
    for (;;) {
        Ptr at = ws(p, e);
        if (at >= e) {
            status = OPEN_END;
            p = e;
            break;
        }
        if (*at == ']') {
            status = CLOSED;
            p = at;
            break;
        }
        if (after_event) {
            if (*at != ',') {
                fail(&s, *at == '}' ? "the event array closes with '}'" : "a missing ',' between events");
                break;
            }
            at = ws(at + 1, e);
            if (at >= e) {
                fail(&s, "the event array is cut off before its closing bracket");
                break;
            }
            if (*at == ']') {
                fail(&s, "a trailing comma");
                break;
            }
        }
        if (*at != '{') {
            fail(&s, "an element of the event array is not an object");
            break;
        }
        if (!reserve_rows(&s, hint)) {
            no_memory = 1;
            break;
        }
        memset(s.set, 0, sizeof s.set);
        p = read_object(&s, AT_TOP, s.rows, at, e, 2);
        if (!p) break;
        s.rows++;
        after_event = 1;
        if (p >= stop) break;
    }
    Py_END_ALLOW_THREADS
    if (no_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (s.failed) {
        out = PyUnicode_FromString(s.error);
        goto done;
    }
    out = result(&s, (size_t)(p - s.buf), status);
done:
    release(&s);
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* dictionary encoding */

/* A string view's bytes: inline, or in data buffer 0 or 1 at its offset. */
static inline Ptr view_bytes(const unsigned char *v, const Py_buffer *data, uint32_t *len) {
    memcpy(len, v, 4);
    if (*len <= INLINE_BYTES) return v + 4;
    uint32_t buffer, offset;
    memcpy(&buffer, v + 8, 4);
    memcpy(&offset, v + 12, 4);
    return (Ptr)data[buffer].buf + offset;
}

static inline uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * UINT64_C(0x9E3779B97F4A7C15);
    return h ^ (h >> 32);
}

/* A hash of the n bytes at p, 16 bytes a step (equal strings are compared in full afterwards). */
static uint64_t hash_bytes(Ptr p, size_t n) {
    uint64_t a = UINT64_C(0x243F6A8885A308D3) ^ n, b = UINT64_C(0x13198A2E03707344);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = mix(a, load8(p + i));
        b = mix(b, load8(p + i + 8));
    }
    uint64_t tail[2] = {0, 0};
    memcpy(tail, p + i, n - i);
    return mix(mix(a, tail[0]), mix(b, tail[1]));
}

#define ENCODE_FIRST_SLOTS 1024

/* encode()'s table of codes (slots of a code + 1, 0 where free) at twice its size, its codes placed
   again by their hashes, and room in hashes for as many codes as half the new table holds; NULL
   (table, hashes and their sizes left as they were, the table freed) where memory runs out. */
static int32_t *grown(int32_t *table, size_t *slots, uint64_t **hashes, size_t *hashes_cap, size_t count) {
    size_t bigger = *slots * 2;
    int32_t *wider = calloc(bigger, sizeof *wider);
    uint64_t *more = wider ? realloc(*hashes, bigger / 2 * sizeof *more) : NULL;
    if (!more) {
        free(wider);
        free(table);
        return NULL;
    }
    for (size_t code = 0; code < count; code++) {
        size_t at = (size_t)more[code] & (bigger - 1);
        while (wider[at]) at = (at + 1) & (bigger - 1);
        wider[at] = (int32_t)code + 1;
    }
    free(table);
    *slots = bigger;
    *hashes = more;
    *hashes_cap = bigger / 2;
    return wider;
}

PyDoc_STRVAR(encode_doc,
             "encode(views, rows, validity, data0, data1) -> (codes, distinct, count)\n\n"
             "Dictionary-encode a column of `rows` Arrow string views (16 bytes each) whose long views point into\n"
             "data0 or data1; rows whose bit in `validity` is clear are skipped (validity None: every row has a\n"
             "value).  Returns int32 codes (0 where null), the views of the distinct values in order of first\n"
             "appearance, and their number.  The hashing runs without the GIL.");

static PyObject *encode(PyObject *self, PyObject *args) {
    Py_buffer views, valid, data[2];
    Py_ssize_t rows;
    PyObject *valid_obj, *out = NULL;
    int valid_held = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nOy*y*", &views, &rows, &valid_obj, &data[0], &data[1])) return NULL;
    if (valid_obj != Py_None) {
        if (PyObject_GetBuffer(valid_obj, &valid, PyBUF_SIMPLE) < 0) goto release;
        valid_held = 1;
    }
    if (rows < 0 || views.len < rows * VIEW_BYTES || (valid_held && valid.len < (rows + 7) / 8)) {
        PyErr_SetString(PyExc_ValueError, "buffers shorter than the rows");
        goto release;
    }
    /* The table of codes starts small and doubles while it is more than half full: a column has
       few distinct values as a rule, and a small table stays in the CPU's caches. */
    size_t n = (size_t)rows, slots = ENCODE_FIRST_SLOTS, hashes_cap = ENCODE_FIRST_SLOTS / 2;
    size_t codes_cap, distinct_cap;
    int32_t *codes = pool_take((n ? n : 1) * sizeof(int32_t), &codes_cap);
    unsigned char *distinct = pool_take((n ? n : 1) * VIEW_BYTES, &distinct_cap);
    int32_t *table = calloc(slots, sizeof *table); /* a code + 1; 0 where free */
    uint64_t *hashes = malloc(hashes_cap * sizeof *hashes);
    if (!codes || !distinct || !table || !hashes) {
        pool_give(codes, codes_cap);
        pool_give(distinct, distinct_cap);
        free(table);
        free(hashes);
        PyErr_NoMemory();
        goto release;
    }
    size_t count = 0;
    int out_of_memory = 0;
    const unsigned char *bits = valid_held ? valid.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (size_t row = 0; row < n; row++) {
        if (bits && !(bits[row >> 3] & (1u << (row & 7)))) {
            codes[row] = 0;
            continue;
        }
        if (count == hashes_cap && !(table = grown(table, &slots, &hashes, &hashes_cap, count))) {
            out_of_memory = 1;
            break;
        }
        const unsigned char *v = (const unsigned char *)views.buf + row * VIEW_BYTES;
        uint32_t len;
        memcpy(&len, v, 4);
        /* A short string is all in its view: its length and up to 12 bytes, the rest masked off
           (whatever the padding), as two words; a long one is hashed from its bytes. */
        uint64_t lo = 0, hi = 0;
        Ptr bytes = NULL;
        uint64_t h;
        if (len <= INLINE_BYTES) {
            memcpy(&lo, v, 8);
            memcpy(&hi, v + 8, 8);
            if (len < 4) lo &= (UINT64_C(1) << (8 * (4 + len))) - 1;
            hi = len <= 4 ? 0 : hi & (len == INLINE_BYTES ? ~UINT64_C(0) : (UINT64_C(1) << (8 * (len - 4))) - 1);
            h = mix(mix(UINT64_C(0x243F6A8885A308D3), lo), hi);
        } else {
            bytes = view_bytes(v, data, &len);
            h = hash_bytes(bytes, len);
        }
        size_t at = (size_t)h & (slots - 1);
        for (;;) {
            int32_t code = table[at] - 1;
            if (code < 0) {
                table[at] = (int32_t)count + 1;
                unsigned char *w = distinct + count * VIEW_BYTES;
                memcpy(w, v, VIEW_BYTES);
                if (!bytes) { /* a short string's view, with its padding cleared */
                    memcpy(w, &lo, 8);
                    memcpy(w + 8, &hi, 8);
                }
                hashes[count] = h;
                codes[row] = (int32_t)count++;
                break;
            }
            const unsigned char *w = distinct + (size_t)code * VIEW_BYTES;
            if (hashes[code] == h && memcmp(w, v, 4) == 0) { /* the same hash and length */
                if (!bytes) {
                    uint64_t wlo, whi;
                    memcpy(&wlo, w, 8);
                    memcpy(&whi, w + 8, 8);
                    if (wlo == lo && whi == hi) {
                        codes[row] = code;
                        break;
                    }
                } else {
                    uint32_t other_len;
                    if (memcmp(view_bytes(w, data, &other_len), bytes, len) == 0) {
                        codes[row] = code;
                        break;
                    }
                }
            }
            at = (at + 1) & (slots - 1);
        }
    }
    Py_END_ALLOW_THREADS
    free(table);
    free(hashes);
    if (out_of_memory) {
        pool_give(codes, codes_cap);
        pool_give(distinct, distinct_cap);
        PyErr_NoMemory();
        goto release;
    }
    out = Py_BuildValue("(NNn)", hand_over(codes, n * sizeof(int32_t), codes_cap),
                        hand_over(distinct, count * VIEW_BYTES, distinct_cap), (Py_ssize_t)count);
release:
    if (valid_held) PyBuffer_Release(&valid);
    PyBuffer_Release(&data[0]);
    PyBuffer_Release(&data[1]);
    PyBuffer_Release(&views);
    return out;
}

PyDoc_STRVAR(trim_doc, "trim() -> None\n\nFree the output buffers kept for the next pass (call once a file is read).");

static PyObject *trim(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pool_trim();
    Py_RETURN_NONE;
}

PyDoc_STRVAR(move_pages_doc,
             "move_pages(buffer, begin, end, target) -> bool\n\n"
             "Move the memory pages of buffer[begin:end] to buffer[target:target + end - begin] (Linux\n"
             "mremap with MREMAP_DONTUNMAP), so that writing there reuses memory already given to the\n"
             "process instead of faulting in fresh pages; buffer[begin:end] then reads as zeros, as\n"
             "after MADV_DONTNEED.  For private anonymous memory (the inflated gzip file).  Offsets are\n"
             "page-aligned and the ranges must not overlap.  False where the system cannot (another OS,\n"
             "a kernel before 5.7, a shared or file mapping): the caller gives the pages back instead.");

static PyObject *move_pages(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t begin, end, target;
    if (!PyArg_ParseTuple(args, "w*nnn", &view, &begin, &end, &target)) return NULL;
    int moved = 0;
#if TQ_PAGE_MOVES
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* linux/mman.h, 5.7+; an older kernel answers EINVAL */
#endif
    long page = sysconf(_SC_PAGESIZE);
    char *base = (char *)view.buf;
    Py_ssize_t n = end - begin;
    int aligned = page > 0 && (uintptr_t)base % (uintptr_t)page == 0 && begin % page == 0 && end % page == 0 &&
                  target % page == 0;
    int inside = begin >= 0 && n > 0 && end <= view.len && target >= 0 && target <= view.len - n;
    int apart = target >= end || target + n <= begin;
    if (aligned && inside && apart) {
        void *to = mremap(base + begin, (size_t)n, (size_t)n, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                          base + target);
        moved = to == (void *)(base + target);
    }
#else
    (void)begin;
    (void)end;
    (void)target;
#endif
    PyBuffer_Release(&view);
    return PyBool_FromLong(moved);
}


/* ------------------------------------------------------------------------------------------ */
/* squeezing inflated text */

/* What squeeze() carries from one call to the next: int64 fields of the caller's state buffer. */
typedef struct {
    int64_t flags;       /* SQ_* */
    int64_t hex_left;    /* hex digits still to come in a \u escape */
    int64_t hex;         /* the \u escape's value so far */
    int64_t blank_run;   /* whitespace bytes in the current run outside strings */
    int64_t string_len;  /* bytes of the current string so far (as written: escapes count in full) */
    int64_t strings_cut; /* strings cut (totals, for the caller's warning) */
    int64_t dropped;     /* bytes dropped */
    int64_t spare;
} Squeeze;

enum { SQ_STRING = 1, SQ_ESCAPE = 2, SQ_DROP = 4, SQ_HIGH = 8 };

static inline int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The first byte at or after p that is a quote or a backslash. */
static inline Ptr quote_or_backslash(Ptr p, Ptr e) {
#if TQ_SSE2
    while (p + 16 <= e) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        unsigned mask = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
        if (mask) return p + tq_ctz32(mask);
        p += 16;
    }
#endif
    while (p < e && *p != '"' && *p != '\\') p++;
    return p;
}

/* Squeeze the n bytes at buf in place; returns how many are kept.  String boundaries are found as
   the lenient parser finds them (a backslash takes the byte after it), so that both parsers see
   the same strings; a string is cut only where its prefix stays valid: not inside an escape, not
   right after the high half of a surrogate pair, not before a UTF-8 continuation byte. */
#if TQ_SSE2
/* Bits of the 64 bytes at p: quotes, backslashes, JSON whitespace. */
static inline void masks64(Ptr p, uint64_t *quotes, uint64_t *backslashes, uint64_t *blanks) {
    uint64_t q = 0, b = 0, w = 0;
    for (int i = 0; i < 4; i++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * i));
        q |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"'))) << (16 * i);
        b |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))) << (16 * i);
        __m128i white = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'))),
                                     _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\t'))));
        w |= (uint64_t)(unsigned)_mm_movemask_epi8(white) << (16 * i);
    }
    *quotes = q;
    *backslashes = b;
    *blanks = w;
}

/* Bit i: the XOR of bits 0..i. */
static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* The usual case, 64 bytes at a time: a block without backslashes in which no limit is reached
   changes nothing but the state (string bounds from the quotes' running parity).  Returns 0 where
   the block needs the byte-by-byte machine. */
static inline int squeeze_block(Squeeze *z, Ptr r, int64_t max_blank, int64_t max_string) {
    uint64_t quotes, backslashes, blanks;
    masks64(r, &quotes, &backslashes, &blanks);
    if (backslashes) return 0;
    int in_string = (z->flags & SQ_STRING) != 0;
    uint64_t inside = prefix_xor(quotes) ^ (in_string ? ~UINT64_C(0) : 0); /* in a string after byte i */
    uint64_t outside_blanks = blanks & ~inside;                          /* quotes are never blank */
    int64_t run;
    if (outside_blanks == ~UINT64_C(0)) {
        run = z->blank_run + 64;
        if (run > max_blank) return 0;
    } else {
        if (z->blank_run + tq_ctz64(~outside_blanks) > max_blank) return 0;
        run = tq_clz64(~outside_blanks); /* the blanks after the last other byte */
    }
    int64_t length;
    if (!quotes) {
        length = in_string ? z->string_len + 64 : 0;
    } else {
        if (in_string && z->string_len + tq_ctz64(quotes) > max_string) return 0;
        length = 63 - (63 - tq_clz64(quotes)); /* the bytes after the last quote */
    }
    int ends_inside = (int)(inside >> 63);
    if (ends_inside && length > max_string) return 0;
    z->blank_run = run;
    z->string_len = ends_inside ? length : 0;
    z->flags = ends_inside ? SQ_STRING : 0;
    return 1;
}
#endif

static size_t squeeze_bytes(Squeeze *z, unsigned char *buf, size_t n, int64_t max_blank, int64_t max_string) {
    unsigned char *r = buf, *w = buf, *e = buf + n;
#if TQ_SSE2
    unsigned char *slow_until = buf;
#endif
    while (r < e) {
#if TQ_SSE2
        /* (runs and strings inside one block are then shorter than a limit) */
        if (r >= slow_until && max_blank >= 64 && max_string >= 64 && !(z->flags & (SQ_DROP | SQ_ESCAPE)) &&
            z->hex_left == 0) {
            while (r + 64 <= e && squeeze_block(z, r, max_blank, max_string)) {
                if (w != r) memmove(w, r, 64);
                w += 64;
                r += 64;
            }
            slow_until = r + 64; /* the block it stopped at goes byte by byte */
            if (r >= e) break;
        }
#endif
        if (!(z->flags & SQ_STRING)) {
#if TQ_SSE2
            /* 16 bytes at a time, up to and including the next quote, while no run of whitespace
               grows past its limit (else byte by byte below) */
            while (r + 16 <= e) {
                __m128i x = _mm_loadu_si128((const __m128i *)r);
                unsigned quotes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')));
                unsigned blanks = (unsigned)_mm_movemask_epi8(
                    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'))),
                                 _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\t')))));
                unsigned k = quotes ? (unsigned)tq_ctz32(quotes) : 16; /* the bytes before the quote */
                unsigned before = k == 16 ? 0xFFFFu : (1u << k) - 1;
                unsigned solid = ~blanks & before;
                if (!solid) {
                    if (z->blank_run >= max_blank) { /* all past the limit: dropped */
                        z->blank_run += k;
                        z->dropped += k;
                        r += k;
                        if (k == 16) continue;
                        break; /* the quote, below */
                    }
                    if (z->blank_run + k > max_blank) break; /* the limit falls inside: byte by byte */
                    z->blank_run += k;
                } else {
                    if (z->blank_run + tq_ctz32(solid) > max_blank) break;
                    z->blank_run = k - 1 - (31 - tq_clz32(solid)); /* the blanks after the last non-blank */
                }
                if (w != r) memmove(w, r, k);
                w += k;
                r += k;
                if (k < 16) break; /* at the quote, below */
            }
            if (r >= e) break;
#endif
            unsigned char c = *r++;
            if (blank(c)) {
                if (++z->blank_run > max_blank) {
                    z->dropped++;
                    continue;
                }
            } else {
                z->blank_run = 0;
                if (c == '"') {
                    z->flags = SQ_STRING;
                    z->string_len = 0;
                    z->hex_left = 0;
                }
            }
            *w++ = c;
        } else if (z->flags & SQ_DROP) {
            if (z->flags & SQ_ESCAPE) { /* the byte a backslash takes */
                z->flags &= ~SQ_ESCAPE;
                r++;
                z->dropped++;
                continue;
            }
            Ptr q = quote_or_backslash(r, e);
            z->dropped += q - r;
            r = (unsigned char *)q;
            if (r >= e) break;
            if (*r == '\\') {
                z->flags |= SQ_ESCAPE;
                r++;
                z->dropped++;
                continue;
            }
            *w++ = '"'; /* the cut string's closing quote */
            r++;
            z->flags = 0;
            z->blank_run = 0;
        } else {
            if (!(z->flags & SQ_ESCAPE) && z->hex_left == 0) {
                /* plain bytes up to a quote or a backslash, but not past the string limit */
                int64_t room = z->string_len < max_string ? max_string - z->string_len : 0;
                Ptr stop = e - r > room ? r + room : e;
                Ptr q = quote_or_backslash(r, stop);
                size_t k = (size_t)(q - r);
                if (k) {
                    if (w != r) memmove(w, r, k);
                    w += k;
                    r += k;
                    z->string_len += (int64_t)k;
                    z->flags &= ~SQ_HIGH;
                }
                if (r >= e) break;
                if (*r == '"') { /* the usual end of a string */
                    *w++ = '"';
                    r++;
                    z->flags = 0;
                    z->blank_run = 0;
                    continue;
                }
            }
            unsigned char c = *r;
            if (c != '"' && z->string_len >= max_string && !(z->flags & (SQ_ESCAPE | SQ_HIGH)) && z->hex_left == 0 &&
                (c & 0xC0) != 0x80) {
                z->flags |= SQ_DROP; /* c and the rest of the string go; the closing quote stays */
                z->strings_cut++;
                continue;
            }
            r++;
            *w++ = c;
            if (z->flags & SQ_ESCAPE) {
                z->flags &= ~SQ_ESCAPE;
                z->string_len++;
                if (c == 'u') {
                    z->hex_left = 4;
                    z->hex = 0;
                } else {
                    z->flags &= ~SQ_HIGH;
                }
            } else if (c == '"') {
                z->flags = 0;
                z->blank_run = 0;
            } else if (c == '\\') {
                z->flags |= SQ_ESCAPE;
                z->hex_left = 0;
                z->string_len++;
            } else {
                z->string_len++;
                int v = z->hex_left ? hex_value(c) : -1;
                if (v < 0) {
                    z->hex_left = 0;
                    z->flags &= ~SQ_HIGH;
                } else {
                    z->hex = z->hex * 16 + v;
                    if (--z->hex_left == 0) {
                        if (z->hex >= 0xD800 && z->hex <= 0xDBFF) z->flags |= SQ_HIGH;
                        else z->flags &= ~SQ_HIGH;
                    }
                }
            }
        }
    }
    return (size_t)(w - buf);
}

PyDoc_STRVAR(squeeze_doc,
             "squeeze(buffer, begin, end, state, max_blank, max_string) -> int\n\n"
             "Squeeze buffer[begin:end] (JSON text as it inflates) in place, toward `begin`, and return the end of\n"
             "what is kept.  Runs of whitespace outside strings keep their first `max_blank` bytes (at least 16);\n"
             "a string keeps its first `max_string` bytes as written (cut where the prefix stays valid JSON text)\n"
             "and its closing quote.  No parser needs what goes: whitespace is insignificant past one byte, and no\n"
             "field keeps more of a string than MAX_TEXT_BYTES (a limit below max_string / 6, the most an escape\n"
             "expands).  `state` (a writable buffer of 8 int64) carries what is open from one call to the next and\n"
             "counts: state[5] the strings cut, state[6] the bytes dropped.  The work runs without the GIL.");

static PyObject *squeeze(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, state;
    Py_ssize_t begin, end, max_blank, max_string;
    if (!PyArg_ParseTuple(args, "w*nnw*nn", &view, &begin, &end, &state, &max_blank, &max_string)) return NULL;
    PyObject *out = NULL;
    if (begin < 0 || end < begin || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "begin:end is outside the buffer");
    } else if (state.len < (Py_ssize_t)sizeof(Squeeze)) {
        PyErr_SetString(PyExc_ValueError, "the state buffer holds fewer than 8 int64");
    } else {
        Squeeze z;
        memcpy(&z, state.buf, sizeof z);
        size_t kept;
        Py_BEGIN_ALLOW_THREADS
        kept = squeeze_bytes(&z, (unsigned char *)view.buf + begin, (size_t)(end - begin), max_blank < 16 ? 16 : max_blank,
                             max_string < 16 ? 16 : max_string);
        Py_END_ALLOW_THREADS
        memcpy(state.buf, &z, sizeof z);
        out = PyLong_FromSsize_t(begin + (Py_ssize_t)kept);
    }
    PyBuffer_Release(&state);
    PyBuffer_Release(&view);
    return out;
}


/* ------------------------------------------------------------------------------------------ */
/* nesting depth */

PyDoc_STRVAR(nesting_depth_doc,
             "nesting_depth(buffer, limit) -> int\n\n"
             "How deep arrays and objects nest in the JSON text `buffer` (brackets inside strings aside; a\n"
             "backslash takes the byte after it, as the lenient parser reads strings), counting no further\n"
             "than limit + 1.  Iterative, without the GIL: the lenient parser asks it before Python's json,\n"
             "which recurses per level, sees the text.");

static PyObject *nesting_depth(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*n", &view, &limit)) return NULL;
    Ptr p = view.buf, e = p + view.len;
    Py_ssize_t depth = 0, deepest = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < e && deepest <= limit) {
        unsigned char c = *p++;
        if (c == '"') {
            for (;;) {
                p = quote_or_backslash(p, e);
                if (p >= e) break;
                if (*p == '"') {
                    p++;
                    break;
                }
                p += 2; /* a backslash and the byte it takes */
            }
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) deepest = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(deepest);
}

static PyMethodDef methods[] = {{"scan", scan, METH_VARARGS, scan_doc},
                                {"trim", trim, METH_NOARGS, trim_doc},
                                {"encode", encode, METH_VARARGS, encode_doc},
                                {"move_pages", move_pages, METH_VARARGS, move_pages_doc},
                                {"squeeze", squeeze, METH_VARARGS, squeeze_doc},
                                {"nesting_depth", nesting_depth, METH_VARARGS, nesting_depth_doc},
                                {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scanner",
                                    "The Kineto fast path's single pass over the event array (see scan).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scanner(void) {
    if (PyType_Ready(&BufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "FLOAT", T_FLOAT) || PyModule_AddIntConstant(m, "INT", T_INT) ||
        PyModule_AddIntConstant(m, "TEXT", T_TEXT) || PyModule_AddIntConstant(m, "TRIPLE", T_TRIPLE) ||
        PyModule_AddIntConstant(m, "ARGS", T_ARGS) || PyModule_AddIntConstant(m, "PART", T_PART) || PyModule_AddIntConstant(m, "TOP", AT_TOP) ||
        PyModule_AddIntConstant(m, "IN_ARGS", AT_ARGS) || PyModule_AddIntConstant(m, "MORE", MORE) ||
        PyModule_AddIntConstant(m, "CLOSED", CLOSED) || PyModule_AddIntConstant(m, "OPEN_END", OPEN_END) ||
        PyModule_AddIntConstant(m, "MAX_TEXT_BYTES", (long)MAX_TEXT_BYTES) ||
        PyModule_AddIntConstant(m, "SSE2", TQ_SSE2) || PyModule_AddIntConstant(m, "PAGE_MOVES", TQ_PAGE_MOVES)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
