// Linux headers that Swift's Glibc module leaves out. Declarations only; no C code.
#pragma once
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <netinet/tcp.h>
#include <signal.h>
