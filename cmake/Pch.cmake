# mplan_pch(TARGET [TESTS]): precompiled headers for TARGET's C++ sources — the standard library,
# nlohmann/json and, with TESTS, GoogleTest — parsed once per target instead of once per file.
# Parsing them was about half of a test file's compile time (clang). CUDA sources are left alone.
# -DMPLAN_PCH=OFF turns them off (e.g. to check that every file includes what it uses).
option(MPLAN_PCH "Precompile the headers most files include" ON)

function(mplan_pch target)
  if(NOT MPLAN_PCH)
    return()
  endif()
  set(headers <algorithm> <array> <chrono> <cmath> <cstdint> <cstdio> <cstdlib> <cstring>
              <filesystem> <fstream> <functional> <iostream> <map> <memory> <optional> <set>
              <sstream> <string> <string_view> <unordered_map> <utility> <vector>
              <nlohmann/json.hpp>)
  if("TESTS" IN_LIST ARGN)
    list(APPEND headers <gtest/gtest.h> <gmock/gmock.h>)
  endif()
  set(cxx_only "")
  foreach(h ${headers})
    list(APPEND cxx_only "$<$<COMPILE_LANGUAGE:CXX>:${h}>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${cxx_only})
endfunction()
