// Shim for a Debian system library; see Package.swift for the package that provides it.
// libpq's headers are in /usr/include/postgresql.
//
// libpq is loaded when first used (dlopen), not linked: only the PostgreSQL store uses it, and
// linking it maps libpq and what it needs (Kerberos, LDAP, SASL, GnuTLS... ~2.9 MB resident) into
// every band-edge process, also into one on SQLite. `be_pq_load_failure()` is NULL once it is
// loaded, else says why not; each be_PQ* call below is libpq's function of the same name through a
// table of its addresses, valid once the load has succeeded (a connection is opened only then).
// A header's statics are one copy per object file that includes it, so each copy is filled on its
// first use (pthread_once, then only read; dlopen hands every copy the same library).
#pragma once
#include <dlfcn.h>
#include <postgresql/libpq-fe.h>
#include <pthread.h>
#include <stddef.h>

// F(return type, name, parameters, arguments): the functions band-edge calls, but the void ones.
#define BE_PQ_FUNCTIONS(F)                                                                             \
  F(PGconn *, PQconnectdbParams, (const char *const *keywords, const char *const *values, int expand),  \
    (keywords, values, expand))                                                                        \
  F(ConnStatusType, PQstatus, (const PGconn *conn), (conn))                                            \
  F(char *, PQerrorMessage, (const PGconn *conn), (conn))                                              \
  F(int, PQsocket, (const PGconn *conn), (conn))                                                       \
  F(int, PQbackendPID, (const PGconn *conn), (conn))                                                   \
  F(int, PQsetClientEncoding, (PGconn * conn, const char *encoding), (conn, encoding))                 \
  F(PQnoticeProcessor, PQsetNoticeProcessor, (PGconn * conn, PQnoticeProcessor processor, void *arg),  \
    (conn, processor, arg))                                                                            \
  F(int, PQconsumeInput, (PGconn * conn), (conn))                                                      \
  F(PGnotify *, PQnotifies, (PGconn * conn), (conn))                                                   \
  F(PGresult *, PQexec, (PGconn * conn, const char *query), (conn, query))                             \
  F(PGresult *, PQexecParams,                                                                          \
    (PGconn * conn, const char *command, int count, const Oid *types, const char *const *values,        \
     const int *lengths, const int *formats, int resultFormat),                                        \
    (conn, command, count, types, values, lengths, formats, resultFormat))                             \
  F(PGresult *, PQprepare, (PGconn * conn, const char *name, const char *query, int count, const Oid *types), \
    (conn, name, query, count, types))                                                                 \
  F(PGresult *, PQexecPrepared,                                                                        \
    (PGconn * conn, const char *name, int count, const char *const *values, const int *lengths,         \
     const int *formats, int resultFormat),                                                            \
    (conn, name, count, values, lengths, formats, resultFormat))                                       \
  F(ExecStatusType, PQresultStatus, (const PGresult *result), (result))                                \
  F(char *, PQresultErrorField, (const PGresult *result, int field), (result, field))                  \
  F(char *, PQcmdTuples, (PGresult * result), (result))                                                \
  F(int, PQntuples, (const PGresult *result), (result))                                                \
  F(int, PQnfields, (const PGresult *result), (result))                                                \
  F(Oid, PQftype, (const PGresult *result, int column), (result, column))                              \
  F(int, PQgetisnull, (const PGresult *result, int row, int column), (result, row, column))            \
  F(char *, PQgetvalue, (const PGresult *result, int row, int column), (result, row, column))          \
  F(int, PQgetlength, (const PGresult *result, int row, int column), (result, row, column))            \
  F(unsigned char *, PQunescapeBytea, (const unsigned char *text, size_t *length), (text, length))
// The void ones, each with its one argument.
#define BE_PQ_PROCEDURES(F) F(PQfinish, PGconn *) F(PQreset, PGconn *) F(PQclear, PGresult *) F(PQfreemem, void *)

#define BE_PQ_FIELD(ret, name, params, args) __typeof__(name) *name;
#define BE_PQ_PROCEDURE_FIELD(name, type) __typeof__(name) *name;
struct be_pq_library {
  const char *failure;
  BE_PQ_FUNCTIONS(BE_PQ_FIELD)
  BE_PQ_PROCEDURES(BE_PQ_PROCEDURE_FIELD)
};
static struct be_pq_library be_pq = {"libpq is not loaded yet"};
static pthread_once_t be_pq_once = PTHREAD_ONCE_INIT;

static void be_pq_load(void) {
  void *library = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    be_pq.failure = "cannot load libpq.so.5 (Debian's libpq5 package)";
    return;
  }
  struct be_pq_library loaded = {NULL};
  int missing = 0;
#define BE_PQ_RESOLVE(name)                                                                           \
  loaded.name = (__typeof__(name) *)dlsym(library, #name);                                             \
  missing |= loaded.name == NULL;
#define BE_PQ_RESOLVE_FUNCTION(ret, name, params, args) BE_PQ_RESOLVE(name)
#define BE_PQ_RESOLVE_PROCEDURE(name, type) BE_PQ_RESOLVE(name)
  BE_PQ_FUNCTIONS(BE_PQ_RESOLVE_FUNCTION)
  BE_PQ_PROCEDURES(BE_PQ_RESOLVE_PROCEDURE)
  if (missing) {
    be_pq.failure = "libpq.so.5 lacks a function band-edge calls";
    return;
  }
  be_pq = loaded;
}

static inline const struct be_pq_library *be_pq_loaded(void) {
  pthread_once(&be_pq_once, be_pq_load);
  return &be_pq;
}

/// NULL once libpq is loaded (the first call loads it); else why it cannot be.
static inline const char *be_pq_load_failure(void) { return be_pq_loaded()->failure; }

#define BE_PQ_WRAPPER(ret, name, params, args)                                                        \
  static inline ret be_##name params { return be_pq_loaded()->name args; }
#define BE_PQ_PROCEDURE_WRAPPER(name, type)                                                           \
  static inline void be_##name(type value) { be_pq_loaded()->name(value); }
BE_PQ_FUNCTIONS(BE_PQ_WRAPPER)
BE_PQ_PROCEDURES(BE_PQ_PROCEDURE_WRAPPER)
