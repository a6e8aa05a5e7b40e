# `mplan run` of a multi-stage plan under mpirun, checked (cmake -P; ctest exec_mplan_run_pp2_dp2):
# it exits 0, prints the measured, predicted and error rows of the time breakdown for every
# pipeline stage and the memory check, and its --json document carries, per stage, the measured
# and predicted breakdown and the error of each part, the prediction and the predicted peak
# memory; its trace has the events of `mplan simulate --trace` of the same plan, by name and
# category (the executor's own waits, dp_wait and param_wait, aside).
# Variables: MPIEXEC, NP_FLAG, NP, MPLAN, PLAN, STAGES, JSON, TRACE.
foreach(v MPIEXEC NP_FLAG NP MPLAN PLAN STAGES JSON TRACE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_mplan_run.cmake: -D${v}=... is missing")
  endif()
endforeach()
file(REMOVE "${JSON}" "${TRACE}")
execute_process(
  COMMAND "${MPIEXEC}" --oversubscribe ${NP_FLAG} ${NP} "${MPLAN}" run "${PLAN}" --backend cpu
          --iters 3 --warmup 1 --trace "${TRACE}" --json "${JSON}"
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mplan run exited ${rc}")
endif()

# The printed table: per stage a measured row, then the predicted and the error rows.
string(REGEX MATCHALL "\n +[0-9]+  measured [^\n]*\n +predicted [^\n]*\n +error [^\n]*" rows
             "${out}")
list(LENGTH rows printed)
if(NOT printed EQUAL STAGES)
  message(FATAL_ERROR "${printed} stages with measured, predicted and error rows printed, "
                      "expected ${STAGES}")
endif()
if(NOT out MATCHES "peak memory per pipeline stage \\(device peak where known\\), predicted vs")
  message(FATAL_ERROR "no memory check against the prediction printed")
endif()

file(READ "${JSON}" j)
string(JSON stages LENGTH "${j}" breakdown)
if(NOT stages EQUAL STAGES)
  message(FATAL_ERROR "breakdown has ${stages} stages, expected ${STAGES}")
endif()
math(EXPR last "${STAGES} - 1")
foreach(s RANGE ${last})
  string(JSON stage GET "${j}" breakdown ${s} stage)
  if(NOT stage EQUAL s)
    message(FATAL_ERROR "breakdown[${s}].stage is ${stage}")
  endif()
  foreach(part compute tp_comm pp_comm dp_comm bubble optimizer total)
    foreach(side measured predicted)
      string(JSON t TYPE "${j}" breakdown ${s} ${side} ${part}_s)
      if(NOT t STREQUAL "NUMBER")
        message(FATAL_ERROR "breakdown[${s}].${side}.${part}_s is ${t}, not a number")
      endif()
    endforeach()
    # The relative error of each part: a number, or null where nothing was measured.
    string(JSON t TYPE "${j}" breakdown ${s} error ${part})
    if(NOT t STREQUAL "NUMBER" AND NOT t STREQUAL "NULL")
      message(FATAL_ERROR "breakdown[${s}].error.${part} is ${t}")
    endif()
  endforeach()
  string(JSON v GET "${j}" breakdown ${s} predicted compute_s)
  if(NOT v GREATER 0)
    message(FATAL_ERROR "breakdown[${s}].predicted.compute_s is ${v}")
  endif()
  string(JSON v GET "${j}" memory stages ${s} predicted_peak_bytes)
  if(NOT v GREATER 0)
    message(FATAL_ERROR "memory.stages[${s}].predicted_peak_bytes is ${v}")
  endif()
endforeach()
string(JSON v GET "${j}" prediction iteration_time_s)
if(NOT v GREATER 0)
  message(FATAL_ERROR "prediction.iteration_time_s is ${v}")
endif()
message("mplan run: ${STAGES} stages, each with its measured and predicted breakdown and errors")

# The measured trace and the simulated one: the same event names, each in the same category.
function(trace_kinds file out)
  file(READ "${file}" doc)
  string(JSON n LENGTH "${doc}" traceEvents)
  math(EXPR n "${n} - 1")
  set(kinds "")
  foreach(i RANGE ${n})
    string(JSON ph GET "${doc}" traceEvents ${i} ph)
    if(NOT ph STREQUAL "X")
      continue()
    endif()
    string(JSON name GET "${doc}" traceEvents ${i} name)
    string(JSON cat GET "${doc}" traceEvents ${i} cat)
    if(NOT name MATCHES "^(dp_wait|param_wait)$")
      list(APPEND kinds "${name}:${cat}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES kinds)
  list(SORT kinds)
  set(${out} "${kinds}" PARENT_SCOPE)
endfunction()
set(sim_trace "${TRACE}.simulated.json")
execute_process(COMMAND "${MPLAN}" simulate "${PLAN}" --trace "${sim_trace}"
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mplan simulate --trace exited ${rc}")
endif()
trace_kinds("${TRACE}" measured)
trace_kinds("${sim_trace}" simulated)
if(NOT measured STREQUAL simulated)
  message(FATAL_ERROR "trace events differ (name:category)\n  measured:  ${measured}\n"
                      "  simulated: ${simulated}")
endif()
message("traces: the same events as the simulator's: ${measured}")
