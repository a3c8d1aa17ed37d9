// Shim for a Debian system library; see Package.swift for the package that provides it.
#pragma once
#include <argon2.h>
