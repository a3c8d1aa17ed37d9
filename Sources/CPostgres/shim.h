// Shim for a Debian system library; see Package.swift for the package that provides it.
// libpq's headers are in /usr/include/postgresql (pkg-config libpq adds the path).
#pragma once
#include <libpq-fe.h>
