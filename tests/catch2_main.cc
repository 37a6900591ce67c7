// The one translation unit that holds Catch2's main (compiling it costs ~20 s).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
