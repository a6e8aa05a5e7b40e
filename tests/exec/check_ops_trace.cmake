# `mplan run --trace-level ops` of a plan under mpirun against `mplan simulate --stack mplan
# --trace-level ops` of the same plan (cmake -P; ctest exec_mplan_run_ops_*): on the first rank's
# compute stream, every kernel and collective the executor ran is one the simulator costs, as
# many times, under the same name ("L1 fc2_dgrad", "tp_all_gather", "L0 copy", ...); and every
# stage's measured peak memory (the executor's allocations) is within 7 % of the predicted peak.
# Variables: MPIEXEC, NP_FLAG, NP, MPLAN, PLAN, TRACE.
foreach(v MPIEXEC NP_FLAG NP MPLAN PLAN TRACE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_ops_trace.cmake: -D${v}=... is missing")
  endif()
endforeach()
set(sim_trace "${TRACE}.simulated.json")
set(run_json "${TRACE}.run.json")
file(REMOVE "${TRACE}" "${sim_trace}" "${run_json}")
execute_process(
  COMMAND "${MPIEXEC}" --oversubscribe ${NP_FLAG} ${NP} "${MPLAN}" run "${PLAN}" --backend cpu
          --iters 1 --warmup 0 --trace "${TRACE}" --trace-level ops --json "${run_json}"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mplan run exited ${rc}\n${out}${err}")
endif()
execute_process(COMMAND "${MPLAN}" simulate "${PLAN}" --stack mplan --trace "${sim_trace}"
                        --trace-level ops
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mplan simulate --trace-level ops exited ${rc}")
endif()

# The names of the complete events of pid 0, tid 0 (both writers put name before cat before pid
# and tid), sorted, one entry per event.
function(first_rank_events file out)
  file(READ "${file}" doc)
  string(REGEX MATCHALL "\"ph\":\"X\",\"name\":\"[^\"]+\",\"cat\":\"[a-z]+\",\"pid\":0,\"tid\":0,"
               events "${doc}")
  set(names "")
  foreach(e IN LISTS events)
    string(REGEX REPLACE "^\"ph\":\"X\",\"name\":\"([^\"]+)\".*" "\\1" name "${e}")
    if(NOT name MATCHES "^(dp_wait|param_wait)$")
      list(APPEND names "${name}")
    endif()
  endforeach()
  list(SORT names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()
first_rank_events("${TRACE}" measured)
first_rank_events("${sim_trace}" simulated)
list(LENGTH measured n)
if(n LESS 50)
  message(FATAL_ERROR "only ${n} events on the first rank: no kernel spans in the trace?")
endif()
if(NOT measured STREQUAL simulated)
  set(only_run "${measured}")
  set(only_sim "${simulated}")
  foreach(x IN LISTS simulated)
    list(FIND only_run "${x}" i)
    if(i GREATER -1)
      list(REMOVE_AT only_run ${i})
      list(FIND only_sim "${x}" j)
      list(REMOVE_AT only_sim ${j})
    endif()
  endforeach()
  message(FATAL_ERROR "kernel events differ\n  only measured: ${only_run}\n"
                      "  only simulated: ${only_sim}")
endif()
message("ops traces: the first rank's ${n} events are the simulator's, name by name")

# Memory: each stage's measured peak against the predicted one.
file(READ "${run_json}" doc)
string(JSON stages LENGTH "${doc}" memory stages)
foreach(s RANGE 0 ${stages})
  if(s EQUAL stages)
    break()
  endif()
  string(JSON err GET "${doc}" memory stages ${s} error)
  if(err GREATER 0.07 OR err LESS -0.07)
    string(JSON m GET "${doc}" memory stages ${s} measured_peak_bytes)
    string(JSON p GET "${doc}" memory stages ${s} predicted_peak_bytes)
    message(FATAL_ERROR "stage ${s}: predicted peak ${p} bytes, measured ${m}: error ${err} "
                        "beyond 7 %")
  endif()
endforeach()
message("memory: every stage's peak within 7 % of the prediction")
