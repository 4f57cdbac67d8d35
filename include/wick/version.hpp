#pragma once
// wick's version: the one place it is written (CMakeLists.txt reads it for project(VERSION)).
#define WICK_VERSION "0.1.0"
#define WICK_VERSION_MAJOR 0
#define WICK_VERSION_MINOR 1
#define WICK_VERSION_PATCH 0
