// Shim for a Debian system library; see Package.swift for the package that provides it.
//
// libcurl is loaded when first used (dlopen), not linked: only mail (SMTP) and the example core's
// JWKS fetch use it, and linking it maps libcurl and the libraries it needs (GnuTLS, nettle,
// p11-kit, libssh2, librtmp... ~2.7 MB resident) into every band-edge process, also into a
// server that never sends mail. Each call below goes through a table of libcurl's addresses.
// Before anything else, a caller asks `be_curl_load_failure()`, which is NULL once libcurl is
// loaded and otherwise says why not. A header's statics are one copy per object file that
// includes it, so each copy is filled on its first use (pthread_once, then only read; dlopen hands
// every copy the same library).
//
// curl_easy_setopt is variadic, which Swift cannot call: one typed wrapper per argument kind.
#pragma once
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

struct be_curl_library {
  const char *failure;
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  CURLcode (*easy_perform)(CURL *);
  void (*easy_cleanup)(CURL *);
  const char *(*easy_strerror)(CURLcode);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
};

static struct be_curl_library be_curl = {"libcurl is not loaded yet"};
static pthread_once_t be_curl_once = PTHREAD_ONCE_INIT;

static void be_curl_load(void) {
  void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    be_curl.failure = "cannot load libcurl.so.4 (Debian's libcurl4 package)";
    return;
  }
  struct be_curl_library loaded = {
    NULL,
    (CURL * (*)(void)) dlsym(library, "curl_easy_init"),
    (CURLcode(*)(CURL *, CURLoption, ...))dlsym(library, "curl_easy_setopt"),
    (CURLcode(*)(CURL *, CURLINFO, ...))dlsym(library, "curl_easy_getinfo"),
    (CURLcode(*)(CURL *))dlsym(library, "curl_easy_perform"),
    (void (*)(CURL *))dlsym(library, "curl_easy_cleanup"),
    (const char *(*)(CURLcode))dlsym(library, "curl_easy_strerror"),
    (struct curl_slist * (*)(struct curl_slist *, const char *)) dlsym(library, "curl_slist_append"),
    (void (*)(struct curl_slist *))dlsym(library, "curl_slist_free_all"),
  };
  if (!loaded.easy_init || !loaded.easy_setopt || !loaded.easy_getinfo || !loaded.easy_perform
      || !loaded.easy_cleanup || !loaded.easy_strerror || !loaded.slist_append || !loaded.slist_free_all) {
    be_curl.failure = "libcurl.so.4 lacks a function band-edge calls";
    return;
  }
  be_curl = loaded;
}

static inline const struct be_curl_library *be_curl_loaded(void) {
  pthread_once(&be_curl_once, be_curl_load);
  return &be_curl;
}

/// NULL once libcurl is loaded (the first call loads it); else why it cannot be.
static inline const char *be_curl_load_failure(void) { return be_curl_loaded()->failure; }

// The calls, valid once be_curl_load_failure() has returned NULL.
static inline CURL *be_curl_easy_init(void) { return be_curl_loaded()->easy_init(); }
static inline CURLcode be_curl_easy_perform(CURL *curl) { return be_curl_loaded()->easy_perform(curl); }
static inline void be_curl_easy_cleanup(CURL *curl) { be_curl_loaded()->easy_cleanup(curl); }
static inline const char *be_curl_easy_strerror(CURLcode code) { return be_curl_loaded()->easy_strerror(code); }
static inline struct curl_slist *be_curl_slist_append(struct curl_slist *list, const char *value) {
  return be_curl_loaded()->slist_append(list, value);
}
static inline void be_curl_slist_free_all(struct curl_slist *list) { be_curl_loaded()->slist_free_all(list); }

static inline CURLcode be_curl_setopt_long(CURL *curl, CURLoption option, long value) {
  return be_curl_loaded()->easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
  return be_curl_loaded()->easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
  return be_curl_loaded()->easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_slist(CURL *curl, CURLoption option, struct curl_slist *value) {
  return be_curl_loaded()->easy_setopt(curl, option, value);
}
typedef size_t (*be_curl_read_callback)(char *buffer, size_t size, size_t count, void *context);
static inline CURLcode be_curl_setopt_read(CURL *curl, be_curl_read_callback callback) {
  return be_curl_loaded()->easy_setopt(curl, CURLOPT_READFUNCTION, callback);
}
static inline CURLcode be_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
  return be_curl_loaded()->easy_getinfo(curl, info, value);
}
typedef size_t (*be_curl_write_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode be_curl_setopt_write(CURL *curl, be_curl_write_callback callback) {
  return be_curl_loaded()->easy_setopt(curl, CURLOPT_WRITEFUNCTION, callback);
}
