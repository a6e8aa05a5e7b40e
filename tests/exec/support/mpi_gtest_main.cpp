// main() of the mpi-label test binary: MPI for the whole run (MpiRuntime), then GoogleTest.
// Ranks other than 0 print only failures, so the log reads like one run.
#include <gtest/gtest.h>

#include "exec/mpi/mpi_runtime.hpp"

int main(int argc, char** argv) {
  mplan::exec::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.identity().world_rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    // Failures still reach stderr through the assertion messages below.
    struct FailurePrinter : ::testing::EmptyTestEventListener {
      int rank;
      explicit FailurePrinter(int r) : rank(r) {}
      void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed())
          fprintf(stderr, "[rank %d] %s:%d: %s\n", rank, r.file_name() ? r.file_name() : "?",
                  r.line_number(), r.message());
      }
    };
    listeners.Append(new FailurePrinter(mpi.identity().world_rank));
  }
  return RUN_ALL_TESTS();
}
