// The `mplan` command line as a function, so that the executable (main.cpp) and the in-process
// fuzzer (tests/cli/fuzz) run exactly the same code. Invariant: every outcome is an exit code
// (0 ok, 1 does not fit or failed while running, 2 bad input, 3 broken invariant); nothing is
// thrown out of it.
#pragma once

namespace mplan::cli {

int run_mplan(int argc, char** argv);

}  // namespace mplan::cli
