// mplan: the command-line entry; everything happens in run_mplan (cli/mplan_app.hpp).
#include "cli/mplan_app.hpp"

int main(int argc, char** argv) { return mplan::cli::run_mplan(argc, argv); }
