// Shim for a Debian system library; see Package.swift for the package that provides it.
// libnghttp2 1.52 (Debian 12, libnghttp2-dev): the HTTP/2 framing layer, driven from the event
// loops with nghttp2_session_mem_recv / nghttp2_session_mem_send; it has no threads of its own.
#pragma once
#include <nghttp2/nghttp2.h>
