/* Reading the pool's events (pool_reply.h): a strict reader of one flat JSON object. */
#include "tools/launcher/pool_reply.h"

#include <stdio.h>
#include <string.h>

struct cursor {
  const char* p;
  const char* end;
};

static void SkipSpace(struct cursor* c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) ++c->p;
}

static int Take(struct cursor* c, char ch) {
  SkipSpace(c);
  if (c->p < c->end && *c->p == ch) {
    ++c->p;
    return 1;
  }
  return 0;
}

static int Hex4(const char* p, unsigned* out) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    char h = p[i];
    v <<= 4;
    if (h >= '0' && h <= '9')
      v |= (unsigned)(h - '0');
    else if (h >= 'a' && h <= 'f')
      v |= (unsigned)(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F')
      v |= (unsigned)(h - 'A' + 10);
    else
      return 0;
  }
  *out = v;
  return 1;
}

/* Appends `ch` to dst (capacity cap, NUL kept) when it fits; a full buffer drops the rest. */
static void Put(char* dst, size_t cap, size_t* n, char ch) {
  if (dst != NULL && *n + 1 < cap) dst[(*n)++] = ch;
}

/* A JSON string at the cursor, decoded into dst (may be NULL: only checked). */
static int String(struct cursor* c, char* dst, size_t cap) {
  size_t n = 0;
  SkipSpace(c);
  if (c->p >= c->end || *c->p != '"') return 0;
  ++c->p;
  while (c->p < c->end) {
    unsigned char ch = (unsigned char)*c->p++;
    if (ch == '"') {
      if (dst != NULL && cap > 0) dst[n] = '\0';
      return 1;
    }
    if (ch < 0x20) return 0;
    if (ch != '\\') {
      Put(dst, cap, &n, (char)ch);
      continue;
    }
    if (c->p >= c->end) return 0;
    char e = *c->p++;
    /* The one-character escapes, and what each stands for. */
    static const char kEscaped[] = "\"\\/bfnrt";
    static const char kMeaning[] = "\"\\/\b\f\n\r\t";
    const char* simple = e != '\0' ? strchr(kEscaped, e) : NULL;
    if (simple != NULL) {
      Put(dst, cap, &n, kMeaning[simple - kEscaped]);
      continue;
    }
    if (e != 'u') return 0;
    unsigned u;
    if (c->end - c->p < 4 || !Hex4(c->p, &u)) return 0;
    c->p += 4;
    /* A surrogate half is written as '?': the text is for a human. */
    if (u >= 0xD800 && u <= 0xDFFF) u = '?';
    if (u < 0x80) {
      Put(dst, cap, &n, (char)u);
    } else if (u < 0x800) {
      Put(dst, cap, &n, (char)(0xC0 | (u >> 6)));
      Put(dst, cap, &n, (char)(0x80 | (u & 0x3F)));
    } else {
      Put(dst, cap, &n, (char)(0xE0 | (u >> 12)));
      Put(dst, cap, &n, (char)(0x80 | ((u >> 6) & 0x3F)));
      Put(dst, cap, &n, (char)(0x80 | (u & 0x3F)));
    }
  }
  return 0;
}

/* An integer (no fraction or exponent) within [lo, hi]. */
static int Integer(struct cursor* c, long lo, long hi, long* out) {
  SkipSpace(c);
  int negative = 0;
  if (c->p < c->end && *c->p == '-') {
    negative = 1;
    ++c->p;
  }
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
  long v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    if (v > 100000000L) return 0; /* far beyond any range asked for */
    v = v * 10 + (*c->p++ - '0');
  }
  if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) return 0;
  if (negative) v = -v;
  if (v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int Literal(struct cursor* c, const char* word) {
  size_t n = strlen(word);
  SkipSpace(c);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return 0;
  c->p += n;
  return 1;
}

static int Bool(struct cursor* c, int* out) {
  if (Literal(c, "true")) {
    *out = 1;
    return 1;
  }
  if (Literal(c, "false")) {
    *out = 0;
    return 1;
  }
  return 0;
}

/* Any JSON value, checked and skipped (objects and arrays at most 16 deep). */
static int SkipValue(struct cursor* c, int depth) {
  SkipSpace(c);
  if (c->p >= c->end || depth > 16) return 0;
  char ch = *c->p;
  if (ch == '"') return String(c, NULL, 0);
  if (ch == '{' || ch == '[') {
    const char close = ch == '{' ? '}' : ']';
    ++c->p;
    if (Take(c, close)) return 1;
    do {
      if (ch == '{' && (!String(c, NULL, 0) || !Take(c, ':'))) return 0;
      if (!SkipValue(c, depth + 1)) return 0;
    } while (Take(c, ','));
    return Take(c, close);
  }
  if (Literal(c, "true") || Literal(c, "false") || Literal(c, "null")) return 1;
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    if (ch == '-') ++c->p;
    const char* digits = c->p;
    while (c->p < c->end && ((*c->p >= '0' && *c->p <= '9') || *c->p == '.' || *c->p == 'e' ||
                             *c->p == 'E' || *c->p == '+' || *c->p == '-'))
      ++c->p;
    return c->p > digits;
  }
  return 0;
}

static int Fail(char* why, size_t why_size, const char* what, const char* field) {
  snprintf(why, why_size, "%s%s%s", what, field[0] ? " " : "", field);
  return -1;
}

int ParsePoolReply(const char* data, size_t size, struct pool_reply* out, char* why,
                   size_t why_size) {
  struct cursor c = {data, data + size};
  char key[64];
  char event[32] = "";
  int has_event = 0;
  memset(out, 0, sizeof *out);
  if (!Take(&c, '{')) return Fail(why, why_size, "not a JSON object", "");
  if (!Take(&c, '}')) {
    do {
      if (!String(&c, key, sizeof key) || !Take(&c, ':'))
        return Fail(why, why_size, "a bad key in the object", "");
      int ok = 1;
      if (strcmp(key, "event") == 0) {
        ok = has_event = String(&c, event, sizeof event);
      } else if (strcmp(key, "exit_code") == 0) {
        ok = out->has_exit_code = Integer(&c, 0, 255, &out->exit_code);
      } else if (strcmp(key, "signo") == 0) {
        ok = out->has_signo = Integer(&c, 0, 64, &out->signo);
      } else if (strcmp(key, "signaled") == 0) {
        ok = Bool(&c, &out->signaled);
      } else if (strcmp(key, "timed_out") == 0) {
        ok = Bool(&c, &out->timed_out);
      } else if (strcmp(key, "oom_killed") == 0) {
        ok = Bool(&c, &out->oom_killed);
      } else if (strcmp(key, "fallback") == 0) {
        ok = Bool(&c, &out->fallback);
      } else if (strcmp(key, "errno") == 0) {
        ok = Integer(&c, 0, 4095, &out->err);
      } else if (strcmp(key, "message") == 0) {
        ok = out->has_message = String(&c, out->message, sizeof out->message);
      } else {
        ok = SkipValue(&c, 0);
      }
      if (!ok) return Fail(why, why_size, "a bad value for", key);
    } while (Take(&c, ','));
    if (!Take(&c, '}')) return Fail(why, why_size, "the object does not end", "");
  }
  SkipSpace(&c);
  if (c.p != c.end) return Fail(why, why_size, "bytes after the object", "");
  if (!has_event) return Fail(why, why_size, "no \"event\"", "");
  if (strcmp(event, "started") == 0) {
    out->event = POOL_EVENT_STARTED;
  } else if (strcmp(event, "exited") == 0) {
    out->event = POOL_EVENT_EXITED;
    if (!out->has_exit_code || !out->has_signo)
      return Fail(why, why_size, "an exit without", out->has_exit_code ? "signo" : "exit_code");
  } else if (strcmp(event, "error") == 0) {
    out->event = POOL_EVENT_ERROR;
  } else {
    out->event = POOL_EVENT_OTHER;
  }
  return 0;
}

int IsJsonSafeUtf8(const char* s, size_t n) {
  const unsigned char* p = (const unsigned char*)s;
  size_t i = 0;
  while (i < n) {
    unsigned char b = p[i];
    if (b == 0) return 0;
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned cp;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
      cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      cp = b & 0x07;
    } else {
      return 0;
    }
    if (n - i < len) return 0;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    i += len;
  }
  return 1;
}
