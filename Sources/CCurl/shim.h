// Shim for a Debian system library; see Package.swift for the package that provides it.
// curl_easy_setopt is variadic, which Swift cannot call: one typed wrapper per argument kind.
#pragma once
#include <curl/curl.h>

static inline CURLcode be_curl_setopt_long(CURL *curl, CURLoption option, long value) {
  return curl_easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
  return curl_easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
  return curl_easy_setopt(curl, option, value);
}
static inline CURLcode be_curl_setopt_slist(CURL *curl, CURLoption option, struct curl_slist *value) {
  return curl_easy_setopt(curl, option, value);
}
typedef size_t (*be_curl_read_callback)(char *buffer, size_t size, size_t count, void *context);
static inline CURLcode be_curl_setopt_read(CURL *curl, be_curl_read_callback callback) {
  return curl_easy_setopt(curl, CURLOPT_READFUNCTION, callback);
}
static inline CURLcode be_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
  return curl_easy_getinfo(curl, info, value);
}
typedef size_t (*be_curl_write_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode be_curl_setopt_write(CURL *curl, be_curl_write_callback callback) {
  return curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, callback);
}
